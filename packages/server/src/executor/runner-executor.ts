import type { AssignmentBroker } from './assignments/assignment-broker.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type {
  ClaimProbe,
  Executor,
  ExecutorPosture,
  PendingClaim,
  StartedAgent,
} from './executor.js';
import type { AttemptLaunch } from '../attempts/attempt-launch.js';
import type { AgentExit } from '../attempts/attempt-lifecycle.js';

/** How long an attempt may wait for a runner before its claim is failed (dispatch_lost). */
export const DEFAULT_RUNNER_WAIT_MS = 24 * 60 * 60_000;
/** How often held attempts are checked against the store (ended → slot free) and acks expired. */
export const DEFAULT_RECONCILE_INTERVAL_MS = 1_000;

export interface RunnerExecutorOptions {
  broker: AssignmentBroker;
  store: Pick<TaskInstanceStore, 'getAttemptFence'>;
  /** how long a claim may wait for a runner (`probeClaim` answers `starting` until then) */
  waitMs?: number;
  reconcileIntervalMs?: number;
  onError?: (err: unknown) => void;
}

/**
 * `executor: runner`: an attempt waits in the assignment broker until a runner of its tenant,
 * with every one of the task's `runner_labels` and a free slot, is connected; the runner then
 * gets the attempt's token in-band and runs it with the agent code. No runner connected → the
 * attempt waits (its claim is `starting`), it does not fail. The store is the truth: an attempt
 * whose row has ended frees its slot at the next reconcile; a lost runner's attempts are reaped
 * by the agent-lost rule like any agent's.
 */
export class RunnerExecutor implements Executor {
  static readonly tokenTransport = 'in-band on the runner session (AwaitAssignment)';
  readonly name = 'runner';
  readonly posture: ExecutorPosture = { tokenTransport: RunnerExecutor.tokenTransport };
  readonly #broker: AssignmentBroker;
  readonly #store: RunnerExecutorOptions['store'];
  readonly #waitMs: number;
  readonly #listeners: Array<(exit: AgentExit) => void> = [];
  readonly #timer: NodeJS.Timeout | undefined;
  readonly #onError: (err: unknown) => void;
  #reconciling = false;

  constructor(o: RunnerExecutorOptions) {
    this.#broker = o.broker;
    this.#store = o.store;
    this.#waitMs = o.waitMs ?? DEFAULT_RUNNER_WAIT_MS;
    this.#onError = o.onError ?? (() => undefined);
    const every = o.reconcileIntervalMs ?? DEFAULT_RECONCILE_INTERVAL_MS;
    if (every > 0) {
      this.#timer = setInterval(() => void this.reconcile().catch(this.#onError), every);
      this.#timer.unref();
    }
  }

  start(launch: AttemptLaunch): Promise<StartedAgent | void> {
    const { identity } = launch;
    this.#broker.enqueue({
      identity: { ...identity, dispatch_gen: identity.dispatch_gen ?? 0 },
      labels: launch.task?.runner_labels ?? {},
      credential: launch.credential,
      heartbeatIntervalMs: launch.heartbeatIntervalMs,
    });
    return Promise.resolve();
  }

  probeClaim(claim: PendingClaim, now: number): ClaimProbe {
    const state = this.#broker.stateOf(claim.task_instance_id, claim.try_number);
    if (state === 'waiting' || state === 'assigned') {
      return { state: 'starting', until: claim.queued_at + this.#waitMs };
    }
    if (state === 'acked') return { state: 'alive' };
    // Not in this process's broker: a restart forgot it (or it was never ours). Nobody will
    // run it, so the scheduler may reset or fail the claim.
    return now >= claim.queued_at ? { state: 'gone' } : { state: 'unknown' };
  }

  /**
   * Waiting: it leaves the queue and the attempt ends now (no agent exists to report). Held: a
   * cancellation is pushed to its runner, whose agent stops the task and reports.
   */
  async terminate(taskInstanceId: string, tryNumber: number): Promise<void> {
    const found = this.#broker.cancel(taskInstanceId, tryNumber, 'termination requested');
    if (found.was === 'waiting') {
      // A requeue's new generation still being written: the end is reported under it.
      const identity = found.settled ? await found.settled : found.attempt.identity;
      this.#emit({
        identity,
        exitCode: null,
        signal: null,
        cause: {
          code: 'LF_RUNNER_CANCELLED',
          message: 'terminated while it was waiting for a runner',
        },
      });
    }
  }

  /** Frees the slots of attempts that ended and returns unacked assignments past their deadline. */
  async reconcile(): Promise<void> {
    if (this.#reconciling) return;
    this.#reconciling = true;
    try {
      this.#broker.expireUnacked();
      await this.#broker.releaseEnded(this.#store);
    } finally {
      this.#reconciling = false;
    }
  }

  onAgentExit(listener: (exit: AgentExit) => void): void {
    this.#listeners.push(listener);
  }

  running(): number {
    return this.#broker.waiting + this.#broker.held;
  }

  close(): Promise<void> {
    clearInterval(this.#timer);
    this.#broker.close();
    return Promise.resolve();
  }

  /** Runner attempts outlive this process (they report to whichever replica answers). */
  release(): Promise<void> {
    clearInterval(this.#timer);
    return Promise.resolve();
  }

  #emit(exit: AgentExit): void {
    for (const l of this.#listeners) l(exit);
  }
}
