import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { AGENT_PROTOCOL_VERSION, AgentService, type Assignment } from '@leoflow/protocol';
import { AGENT_VERSION } from '../agent.js';
import { bearerInterceptor } from '../rpc.js';
import { sleep } from '../retry.js';
import type { TokenHolder } from '../token.js';
import { reconnectDelayMs } from './backoff.js';
import { RunnerAttempt, type AttemptHost } from './runner-attempt.js';
import type { RunnerTransport } from './transport.js';

/** Exit codes of `leoflow-runner`. */
export const RUNNER_EXIT = {
  /** stopped (a signal), or the stdio stream ended */
  OK: 0,
  /** bad arguments or URL */
  USAGE: 2,
  /** the door refused the token for good: the runner was deleted or the token is wrong */
  REFUSED: 3,
} as const;

/** The most attempts one stream asks for; the cell caps it at the runner's capacity. */
const MAX_SLOTS = 1024;

export interface RunnerDaemonOptions extends Omit<AttemptHost, 'clientFor'> {
  transport: RunnerTransport;
  /** attempts at once on this machine (the cell also caps at the runner's registered capacity) */
  maxAttempts?: number;
  random?: () => number;
}

/**
 * The runner daemon: one HTTP/2 connection over the transport (re-dialled when it drops), an
 * AwaitAssignment stream as the runner, and each assignment run with the agent code under its
 * own attempt token. A dropped session is reconnected with backoff and jitter; attempts that
 * were running carry on and their next calls go over the new session (their RPCs retry), so a
 * short drop loses nothing, and a runner gone for good has its attempts reaped by the
 * control plane's agent-lost rule and retried.
 */
export class RunnerDaemon {
  readonly #o: RunnerDaemonOptions;
  readonly #sessions: Http2SessionManager;
  readonly #runner: Client<typeof AgentService>;
  readonly #attempts = new Map<string, { attempt: RunnerAttempt; stream: number }>();
  readonly #stop = new AbortController();
  #stream = 0;
  #restartStream: AbortController | undefined;
  /** since when the cell has been out of reach, and how many tries failed (logged once) */
  #outage: { since: number; tries: number } | undefined;

  constructor(o: RunnerDaemonOptions) {
    this.#o = o;
    o.transport.onSessionUp(() => {
      if (this.#outage === undefined) return;
      const { since, tries } = this.#outage;
      this.#outage = undefined;
      o.diag.log(
        'info',
        `runner session back after ${tries} failed ${tries === 1 ? 'try' : 'tries'} over ${Math.round((Date.now() - since) / 1000)} s`,
      );
    });
    this.#sessions = new Http2SessionManager(
      'http://runner-session',
      { pingIntervalMs: 30_000, pingTimeoutMs: 10_000 },
      { createConnection: () => o.transport.connect() },
    );
    this.#runner = createClient(
      AgentService,
      createGrpcTransport({ baseUrl: 'http://runner-session', sessionManager: this.#sessions }),
    );
  }

  get running(): number {
    return this.#attempts.size;
  }

  /** Runs until stopped, refused by the door, or (stdio) the stream ends. */
  async run(): Promise<number> {
    let failures = 0;
    while (!this.#stop.signal.aborted) {
      const started = Date.now();
      let refusedBy: string | undefined;
      try {
        await this.#awaitAssignments();
      } catch (err) {
        refusedBy = this.#o.transport.refused;
        if (!this.#stop.signal.aborted && refusedBy === undefined) this.#lost(err);
      }
      refusedBy ??= this.#o.transport.refused;
      if (refusedBy !== undefined) {
        this.#o.diag.log('error', refusedBy);
        await this.#abandonAttempts();
        return RUNNER_EXIT.REFUSED;
      }
      if (this.#stop.signal.aborted) break;
      if (!this.#o.transport.reconnects) {
        // The one stream is gone and no other comes: nothing these attempts report can arrive,
        // and their tasks would run on unseen while the control plane retries them elsewhere.
        if (this.#attempts.size > 0) {
          this.#o.diag.log(
            'warn',
            `the stream ended with ${this.#attempts.size} attempt(s) running: stopping their tasks (the control plane reaps and retries them)`,
          );
        }
        await this.#abandonAttempts();
        return RUNNER_EXIT.OK;
      }
      // A session that lived a while was not a failure: start the backoff over.
      failures = Date.now() - started > 60_000 ? 0 : failures + 1;
      this.#sessions.abort();
      await sleep(
        Math.min(
          this.#o.transport.maxReconnectDelayMs ?? Number.POSITIVE_INFINITY,
          reconnectDelayMs(failures, this.#o.random),
        ),
      );
    }
    await this.#drainAttempts();
    this.#sessions.abort();
    return RUNNER_EXIT.OK;
  }

  /**
   * Logs a lost session once per outage (a cell restart is dozens of refused tries); the next
   * is logged once a session is back.
   */
  #lost(err: unknown): void {
    if (this.#outage !== undefined) {
      this.#outage.tries++;
      return;
    }
    this.#outage = { since: Date.now(), tries: 1 };
    const reason = this.#o.transport.lastError ?? describe(err);
    this.#o.diag.log(
      'warn',
      this.#o.transport.reconnects
        ? `runner session lost: ${reason}; reconnecting with backoff (0.5 s doubling to 30 s, jittered), logged again once it is back`
        : `runner session lost: ${reason}`,
    );
  }

  /** Stops taking work; running attempts are cancelled (their tasks stopped) and awaited. */
  stop(): void {
    this.#stop.abort();
    this.#restartStream?.abort();
    for (const { attempt } of this.#attempts.values()) attempt.cancel();
  }

  /**
   * Nothing of this runner reaches the cell any more: its tasks are stopped (their attempts'
   * calls end at the agent's cutoff after the signal), and killed if they outlast the wait; the
   * control plane reaps their attempts (agent lost) and retries them elsewhere.
   */
  async #abandonAttempts(): Promise<void> {
    this.stop();
    await this.#drainAttempts(15_000);
    this.killNow();
    this.#sessions.abort();
  }

  /** Last resort (a crash): no task group outlives the daemon. */
  killNow(): void {
    for (const { attempt } of this.#attempts.values()) attempt.killNow();
  }

  async #awaitAssignments(): Promise<void> {
    const stream = ++this.#stream;
    const restart = new AbortController();
    this.#restartStream = restart;
    const signal = AbortSignal.any([this.#stop.signal, restart.signal]);
    const max = Math.min(this.#o.maxAttempts ?? MAX_SLOTS, MAX_SLOTS);
    const events = this.#runner.awaitAssignment(
      {
        freeSlots: Math.max(0, max - this.#attempts.size),
        agentVersion: AGENT_VERSION,
        protocolVersion: AGENT_PROTOCOL_VERSION,
      },
      { signal },
    );
    try {
      for await (const m of events) {
        const e = m.event;
        if (e.case === 'assignment') void this.#take(e.value, stream, max);
        else if (e.case === 'cancellation') {
          for (const a of this.#attempts.values()) {
            if (a.attempt.assignmentId === e.value.assignmentId) a.attempt.cancel();
          }
        }
      }
    } catch (err) {
      // Our own restart (free slots changed) is not a lost session.
      if (restart.signal.aborted && !this.#stop.signal.aborted) return;
      throw err;
    }
  }

  /** Acks with the attempt's own token, then runs it; an assignment beyond capacity is left unacked. */
  async #take(a: Assignment, stream: number, max: number): Promise<void> {
    if (this.#attempts.size >= max) return; // not acked: back to the queue at its deadline
    const attempt = new RunnerAttempt(a, { ...this.#o, clientFor: (t) => this.#clientFor(t) });
    this.#attempts.set(a.assignmentId, { attempt, stream });
    try {
      const ack = await attempt.ack();
      if (!ack.accepted) {
        this.#o.diag.log('warn', `assignment not taken: ${ack.terminateReason || 'refused'}`);
        this.#attempts.delete(a.assignmentId);
        attempt.discard();
        return;
      }
    } catch (err) {
      this.#o.diag.log('warn', `assignment ack failed: ${describe(err)}`);
      this.#attempts.delete(a.assignmentId);
      attempt.discard();
      return;
    }
    await attempt.run();
    this.#attempts.delete(a.assignmentId);
    // An attempt taken on an earlier stream frees a slot that stream's free_slots never
    // counted: offer it by asking again.
    if (stream !== this.#stream) this.#restartStream?.abort();
  }

  #clientFor(tokens: TokenHolder): Client<typeof AgentService> {
    return createClient(
      AgentService,
      createGrpcTransport({
        baseUrl: 'http://runner-session',
        sessionManager: this.#sessions,
        interceptors: [bearerInterceptor(tokens)],
      }),
    );
  }

  async #drainAttempts(maxMs = Number.POSITIVE_INFINITY): Promise<void> {
    const until = Date.now() + maxMs;
    while (this.#attempts.size > 0 && Date.now() < until) await sleep(100);
  }
}

function describe(err: unknown): string {
  const e = ConnectError.from(err);
  return e.code === Code.Unknown ? e.message : `${Code[e.code]}: ${e.rawMessage}`;
}
