import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import {
  AGENT_PROTOCOL_VERSION,
  AgentService,
  ERROR_CODE_METADATA,
  WARM_WORKER_NOT_LEADER_CODE,
  WARM_WORKER_RECYCLE_MESSAGE,
  type Assignment,
} from '@leoflow/protocol';
import { AGENT_VERSION, EXIT } from '../agent.js';
import { AgentEndpoints, failoverTransport, parseAgentUrls } from '../endpoints.js';
import { bearerInterceptor } from '../rpc.js';
import { TokenHolder } from '../token.js';
import { reconnectDelayMs } from '../runner/backoff.js';
import { RunnerAttempt, type AttemptHost } from '../runner/runner-attempt.js';
import { killDescendants } from './descendants.js';

/**
 * Reconnects after NOT_LEADER back off like any reconnect (jittered) but only up to this many
 * doublings (a ceiling of 2 s): the leader is up, this connection just reached another replica.
 */
export const NOT_LEADER_BACKOFF_STEPS = 2;

/**
 * What the termination log says when a pod must be recycled rather than reused: the protocol's
 * constant, the very text the pool manager matches to record the recycle as `survivor`.
 */
export const RECYCLE_MESSAGE = WARM_WORKER_RECYCLE_MESSAGE;

export interface WarmWorkerOptions extends Omit<AttemptHost, 'clientFor'> {
  /**
   * the control plane's agent URLs (https://, or http:// on loopback), comma-separated, as an
   * attempt agent dials them: every replica's, or one address in front of them all
   */
  agentUrl: string;
  /** the worker-scoped token from the exchange; renewed from the AwaitAssignment stream */
  workerToken: TokenHolder;
  /** the pod's termination message (the reason it exits) */
  terminate: (message: string) => void;
  /** finds what the previous attempt left outside its uid; tests inject survivors */
  sweepDescendants?: () => Promise<number[]>;
  random?: () => number;
  /** waits between reconnects (tests record the delays instead of waiting) */
  sleep?: (ms: number) => Promise<void>;
}

/**
 * A warm pool pod's worker: one attempt at a time, each run by the same code as a runner's
 * attempt under its own token (the worker token only ever waits for assignments). Between
 * attempts it makes sure nothing of the last one is left — processes of its uid, descendants of
 * the worker, its work dir — and a pod where anything survived takes no more work: it exits with
 * EXIT.RECYCLE and the pool replaces it.
 */
export class WarmWorker {
  readonly #o: WarmWorkerOptions;
  readonly #endpoints: AgentEndpoints;
  readonly #worker: Client<typeof AgentService>;
  readonly #stop = new AbortController();
  #restartStream: AbortController | undefined;
  #current: RunnerAttempt | undefined;
  #running: Promise<void> | undefined;
  #exitCode: number | undefined;
  /** attempts this worker has taken (acked), for its diagnostics */
  attemptsTaken = 0;
  /** the one tenant this pod serves: the first assignment's (issue 33, Kubernetes) */
  #tenant: string | undefined;

  constructor(o: WarmWorkerOptions) {
    this.#o = o;
    this.#endpoints = new AgentEndpoints(parseAgentUrls(o.agentUrl), {
      onSwitch: (from, to) =>
        o.diag.log('info', `warm worker: leaving ${from}; next connection to ${to}`),
    });
    this.#worker = this.#clientFor(o.workerToken);
  }

  /** Runs until stopped, refused, or recycled; the process exit code. */
  async run(): Promise<number> {
    let failures = 0;
    let notLeader = 0;
    while (!this.#stop.signal.aborted) {
      const started = Date.now();
      const endpoint = this.#endpoints.current;
      try {
        await this.#awaitAssignments();
        notLeader = 0;
        continue; // our own restart: the free slot count changed
      } catch (err) {
        if (this.#stop.signal.aborted) break;
        const e = ConnectError.from(err);
        if (e.metadata.get(ERROR_CODE_METADATA) === WARM_WORKER_NOT_LEADER_CODE) {
          // Not a failure of ours: this connection reached a replica that does not lead. A new
          // one (the old session dropped; the next URL of the list, when there are several)
          // may reach the leader.
          notLeader++;
          this.#o.diag.log(
            'info',
            `warm worker: ${WARM_WORKER_NOT_LEADER_CODE}: this control-plane replica does not lead; reconnecting on a new connection`,
          );
          this.#endpoints.moveOn('not the leader', endpoint);
          await this.#sleep(
            reconnectDelayMs(Math.min(notLeader, NOT_LEADER_BACKOFF_STEPS), this.#o.random),
          );
          continue;
        }
        if (isRefusal(e.code)) {
          this.#end(
            EXIT.WORKER_REFUSED,
            `warm worker: the control plane refused the worker token (${Code[e.code]}: ${e.rawMessage}); the pool recycles this pod`,
          );
          break;
        }
        this.#o.diag.log('warn', `warm worker: assignment stream lost: ${describe(e)}`);
      }
      failures = Date.now() - started > 60_000 ? 0 : failures + 1;
      this.#endpoints.moveOn('assignment stream lost', endpoint);
      await this.#sleep(reconnectDelayMs(failures, this.#o.random));
    }
    await this.#running;
    this.#endpoints.close();
    return this.#exitCode ?? EXIT.OK;
  }

  /** Stops taking work; a running attempt is cancelled (its task stopped) and awaited. */
  stop(): void {
    this.#stop.abort();
    this.#restartStream?.abort();
    this.#current?.cancel();
  }

  /** Last resort (a crash): the attempt's tasks must not outlive the worker. */
  killNow(): void {
    this.#current?.killNow();
  }

  async #awaitAssignments(): Promise<void> {
    const restart = new AbortController();
    this.#restartStream = restart;
    const signal = AbortSignal.any([this.#stop.signal, restart.signal]);
    // While an attempt runs the stream stays open with no free slot: the worker token's
    // renewals and the attempt's cancellation arrive only here.
    const events = this.#worker.awaitAssignment(
      {
        freeSlots: this.#current ? 0 : 1,
        agentVersion: AGENT_VERSION,
        protocolVersion: AGENT_PROTOCOL_VERSION,
      },
      { signal },
    );
    try {
      for await (const m of events) {
        const e = m.event;
        if (e.case === 'workerToken') this.#o.workerToken.swap(e.value.token);
        else if (e.case === 'assignment') this.#take(e.value);
        else if (e.case === 'cancellation') {
          if (this.#current?.assignmentId === e.value.assignmentId) this.#current.cancel();
        }
      }
    } catch (err) {
      if (restart.signal.aborted && !this.#stop.signal.aborted) return;
      throw err;
    }
    if (restart.signal.aborted && !this.#stop.signal.aborted) return;
    throw new ConnectError('the server ended the assignment stream', Code.Unavailable);
  }

  /** One attempt at a time: an assignment that arrives while busy is left unacked (requeued). */
  #take(a: Assignment): void {
    if (this.#current || this.#exitCode !== undefined) return;
    // A warm pod serves one tenant only: what attempts in one pod still share (docs/security.md)
    // is never shared across tenants. The pools are keyed by tenant; this holds even if a
    // routing bug offered another tenant's attempt here (left unacked: it goes back to the queue).
    const tenant = a.spec?.tenantId || undefined;
    if (tenant !== undefined && this.#tenant !== undefined && tenant !== this.#tenant) {
      this.#o.diag.log('error', `${RECYCLE_MESSAGE}: offered an attempt of another tenant`);
      this.#end(EXIT.RECYCLE, RECYCLE_MESSAGE);
      this.#stop.abort();
      this.#restartStream?.abort();
      return;
    }
    this.#tenant ??= tenant;
    const attempt = new RunnerAttempt(a, { ...this.#o, clientFor: (t) => this.#clientFor(t) });
    this.#current = attempt;
    // The stream stays open while the attempt runs: its renewals and a cancellation of this
    // attempt arrive on it, and the server, which holds this assignment against the stream's one
    // slot, offers nothing more. Reopening it here would detach this worker from the broker and
    // put the not-yet-acked assignment back in the queue.
    this.#running = this.#runAttempt(attempt);
  }

  async #runAttempt(attempt: RunnerAttempt): Promise<void> {
    let taken = false;
    try {
      const ack = await attempt.ack();
      taken = ack.accepted;
      if (!taken) {
        this.#o.diag.log('warn', `assignment not taken: ${ack.terminateReason || 'refused'}`);
      }
    } catch (err) {
      this.#o.diag.log('warn', `assignment ack failed: ${describe(ConnectError.from(err))}`);
    }
    if (!taken) attempt.discard();
    else {
      this.attemptsTaken++;
      await attempt.run();
    }
    const survivors = [...(taken ? attempt.leftovers : [])];
    // Not root (a `restricted` pod: no mount namespace, one uid for every attempt): what the
    // attempt wrote in the pod's writable dirs is wiped, as the worker's own uid, before the next.
    const me = process.getuid?.();
    if (this.#o.launcher && me !== undefined && me !== 0 && !this.#o.attemptUids) {
      this.#o.launcher.wipeOwnLeftovers(me);
    }
    const descendants = await (this.#o.sweepDescendants ?? killDescendants)();
    if (descendants.length > 0) {
      survivors.push(`processes ${descendants.join(', ')} survived SIGKILL`);
    }
    // Attempt N's token holder goes with it: nothing of this worker refers to it any more.
    this.#current = undefined;
    if (survivors.length > 0) {
      this.#o.diag.log('error', `${RECYCLE_MESSAGE}: ${survivors.join('; ')}`);
      this.#end(EXIT.RECYCLE, RECYCLE_MESSAGE);
      this.#stop.abort();
      this.#restartStream?.abort();
      return;
    }
    this.#restartStream?.abort(); // a free slot again
  }

  #end(code: number, message: string): void {
    if (this.#exitCode !== undefined) return;
    this.#exitCode = code;
    this.#o.diag.log('error', message);
    this.#o.terminate(message);
  }

  /** A client over the worker's endpoints: an attempt's calls follow the worker's replica. */
  #clientFor(tokens: TokenHolder): Client<typeof AgentService> {
    return createClient(
      AgentService,
      failoverTransport(this.#endpoints, () => [bearerInterceptor(tokens)]),
    );
  }

  #sleep(ms: number): Promise<void> {
    if (this.#o.sleep) return this.#o.sleep(ms);
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const signal = this.#stop.signal;
      function done(): void {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

/** The worker token is not (or no longer) good: a new token needs a new pod. */
function isRefusal(code: Code): boolean {
  return (
    code === Code.Unauthenticated ||
    code === Code.PermissionDenied ||
    code === Code.FailedPrecondition
  );
}

function describe(e: ConnectError): string {
  return e.code === Code.Unknown ? e.message : `${Code[e.code]}: ${e.rawMessage}`;
}
