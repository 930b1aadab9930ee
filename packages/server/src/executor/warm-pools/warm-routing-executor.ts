import { resolveKubernetesChoices } from '@leoflow/core';
import type { TaskInstanceStore } from '../../store/ports/task-instances.js';
import type { AssignmentBroker } from '../assignments/assignment-broker.js';
import type { ClaimProbe, Executor, PendingClaim, StartedAgent } from '../executor.js';
import type { AttemptLaunch } from '../../attempts/attempt-launch.js';
import type { AgentExit } from '../../attempts/attempt-lifecycle.js';
import type { KubernetesTenantPlacement } from '../kubernetes/pod-builder.js';
import { WORKER_POOL_ANNOTATION } from '../kubernetes/exchange/reviewed-pod.js';
import type { WarmPoolManager } from './pool-manager.js';

/** How long a warm-routed attempt may wait (for a worker, or for its ack) before it is lost. */
export const DEFAULT_WARM_WAIT_MS = 5 * 60_000;
/**
 * How long an attempt waits for a pool worker that is busy (attached, its slot taken) before it
 * gets a cold pod. A chain's downstream is dispatched the moment its upstream reports, while the
 * worker that ran the upstream is still removing what it left: it is free again within
 * milliseconds, far sooner than a cold pod starts.
 */
export const DEFAULT_BUSY_WORKER_WAIT_MS = 2_000;

export interface WarmRoutingOptions {
  /** the Kubernetes executor: cold pods, and the fallback */
  inner: Executor;
  /** the warm pools' broker (not the runners') */
  broker: AssignmentBroker;
  manager: Pick<WarmPoolManager, 'poolFor'>;
  /** where a tenant's attempt pods run and what they may choose (the pod builder's input) */
  placement: (tenantId: string) => KubernetesTenantPlacement | undefined;
  /** the truth about attempts: an ended one frees its worker */
  store: Pick<TaskInstanceStore, 'getAttemptFence'>;
  waitMs?: number;
  /** DEFAULT_BUSY_WORKER_WAIT_MS; 0 sends an attempt with no free worker cold at once */
  busyWorkerWaitMs?: number;
  onError?: (err: unknown) => void;
}

function attemptKey(taskInstanceId: string, tryNumber: number): string {
  return `${taskInstanceId}#${tryNumber}`;
}

/**
 * The Kubernetes executor with warm pools in front. An attempt whose tenant, service account
 * and image — resolved exactly as the pod builder would — match a pool that has an idle worker
 * attached goes to that pool's broker (its token minted at hand-over, in-band); one whose pool's
 * workers are all busy waits for one briefly (busyWorkerWaitMs), then gets a cold pod; any other
 * attempt gets its cold pod. An attempt requeued in the warm broker (its assignment not acked
 * in time: its token died with the requeue fence) falls back to a cold pod at the next
 * reconcile when no warm worker is free for it: it never waits on a pool that may have none.
 */
export class WarmRoutingExecutor implements Executor {
  readonly name: string;
  readonly posture: Executor['posture'];
  readonly #o: WarmRoutingOptions;
  readonly #waitMs: number;
  /** warm-routed attempts, with their launch (for a cold fallback) */
  readonly #warm = new Map<string, AttemptLaunch>();
  readonly #listeners: Array<(exit: AgentExit) => void> = [];
  readonly #busyWaitMs: number;
  /** attempts waiting briefly for a busy worker: the timer that sends them cold */
  readonly #busyWaits = new Map<string, NodeJS.Timeout>();

  constructor(o: WarmRoutingOptions) {
    this.#o = o;
    this.name = o.inner.name;
    this.posture = o.inner.posture;
    this.#waitMs = o.waitMs ?? DEFAULT_WARM_WAIT_MS;
    this.#busyWaitMs = o.busyWorkerWaitMs ?? DEFAULT_BUSY_WORKER_WAIT_MS;
    o.inner.onAgentExit((exit) => this.#emit(exit));
  }

  warm(target: { agentUrl: string; heartbeatIntervalMs: number }): void {
    this.#o.inner.warm?.(target);
  }

  /**
   * The pool this attempt would run in, or undefined: no pool, a choice the allowlist refuses,
   * or resources (the task's or the tenant's defaults) — a pool pod carries none, so such an
   * attempt runs in a cold pod where its requests and limits hold.
   */
  poolOf(launch: AttemptLaunch): string | undefined {
    const placement = this.#o.placement(launch.identity.tenant_id);
    if (!placement) return undefined;
    let choice;
    try {
      choice = resolveKubernetesChoices(launch.task?.kubernetes, placement.allowlist);
    } catch {
      return undefined; // the cold path reports the refusal as it always has
    }
    const { requests, limits } = choice.resources;
    if (Object.keys(requests).length > 0 || Object.keys(limits).length > 0) return undefined;
    return this.#o.manager.poolFor(launch.identity.tenant_id, choice.serviceAccount, choice.image);
  }

  start(launch: AttemptLaunch): Promise<StartedAgent | void> {
    const pool = this.poolOf(launch);
    const labels = pool ? { [WORKER_POOL_ANNOTATION]: pool } : undefined;
    const tenant = launch.identity.tenant_id;
    const free = labels !== undefined && this.#o.broker.hasFreeWorkerFor(tenant, labels);
    const busy =
      !free &&
      labels !== undefined &&
      this.#busyWaitMs > 0 &&
      this.#o.broker.hasWorkerFor(tenant, labels);
    if (!labels || (!free && !busy)) return this.#o.inner.start(launch);
    const { identity } = launch;
    const key = attemptKey(identity.task_instance_id, identity.try_number);
    this.#warm.set(key, launch);
    if (busy) {
      // Waits for the busy worker, briefly; then a cold pod (unless a worker took it meanwhile).
      const timer = setTimeout(() => {
        this.#busyWaits.delete(key);
        void this.#coldIfStillWaiting(key).catch((err: unknown) => this.#o.onError?.(err));
      }, this.#busyWaitMs);
      timer.unref();
      this.#busyWaits.set(key, timer);
    }
    this.#o.broker.enqueue({
      identity: { ...identity, dispatch_gen: identity.dispatch_gen ?? 0 },
      labels,
      credential: launch.credential,
      heartbeatIntervalMs: launch.heartbeatIntervalMs,
    });
    return Promise.resolve();
  }

  probeClaim(claim: PendingClaim, now: number): ClaimProbe | Promise<ClaimProbe> {
    const key = attemptKey(claim.task_instance_id, claim.try_number);
    if (!this.#warm.has(key)) {
      return this.#o.inner.probeClaim?.(claim, now) ?? { state: 'unknown' };
    }
    const state = this.#o.broker.stateOf(claim.task_instance_id, claim.try_number);
    if (state === 'waiting' || state === 'assigned') {
      return { state: 'starting', until: claim.queued_at + this.#waitMs };
    }
    if (state === 'acked') return { state: 'alive' };
    return { state: 'gone' };
  }

  /** Waiting: it leaves the queue and ends now. Held: the worker is told to cancel it. */
  async terminate(taskInstanceId: string, tryNumber: number): Promise<void> {
    const key = attemptKey(taskInstanceId, tryNumber);
    if (!this.#warm.has(key)) return this.#o.inner.terminate(taskInstanceId, tryNumber);
    const found = this.#o.broker.cancel(taskInstanceId, tryNumber, 'termination requested');
    if (found.was === 'waiting') {
      this.#warm.delete(key);
      // A requeue's new generation still being written: the end is reported under it.
      const identity = found.settled ? await found.settled : found.attempt.identity;
      this.#emit({
        identity,
        exitCode: null,
        signal: null,
        cause: {
          code: 'LF_RUNNER_CANCELLED',
          message: 'terminated while it was waiting for a warm-pool worker',
        },
      });
    }
  }

  /**
   * Frees the workers of attempts that ended (the store is the truth; the worker is then idle,
   * or recycled at its attempt limit), returns unacked assignments past their lease to the
   * queue (their tokens die), then sends every waiting warm attempt with no free worker for it
   * to a cold pod, under the generation the requeue gave it.
   */
  async reconcile(): Promise<void> {
    await this.#o.broker.releaseEnded(this.#o.store);
    this.#o.broker.expireUnacked();
    for (const waiting of this.#o.broker.waitingAttempts()) {
      const key = attemptKey(waiting.identity.task_instance_id, waiting.identity.try_number);
      // still within its brief wait for a busy worker: its own timer decides
      if (this.#busyWaits.has(key)) continue;
      await this.#coldIfStillWaiting(key);
    }
    // Attempts no longer in the broker (ended, released) are no longer warm ones.
    for (const [key, launch] of this.#warm) {
      const { task_instance_id, try_number } = launch.identity;
      if (this.#o.broker.stateOf(task_instance_id, try_number) === undefined)
        this.#warm.delete(key);
    }
  }

  /**
   * A warm attempt still waiting in the broker with no free worker for it goes to a cold pod,
   * under the dispatch generation it has now (a requeue may have moved it on).
   */
  async #coldIfStillWaiting(key: string): Promise<void> {
    const launch = this.#warm.get(key);
    if (!launch) return;
    const { task_instance_id, try_number } = launch.identity;
    const waiting = this.#o.broker
      .waitingAttempts()
      .find(
        (w) =>
          w.identity.task_instance_id === task_instance_id && w.identity.try_number === try_number,
      );
    if (!waiting) return; // a worker took it, or it ended
    if (this.#o.broker.hasFreeWorkerFor(waiting.identity.tenant_id, waiting.labels)) return;
    if (this.#o.broker.cancel(task_instance_id, try_number, 'cold fallback').was !== 'waiting') {
      return;
    }
    this.#warm.delete(key);
    const gen = waiting.identity.dispatch_gen;
    await this.#o.inner
      .start({
        ...launch,
        identity: { ...launch.identity, dispatch_gen: gen },
        credential: { mint: (f) => launch.credential.mint(f ?? { dispatch_gen: gen }) },
      })
      .catch((err: unknown) => {
        this.#o.onError?.(err);
        this.#emit({
          identity: waiting.identity,
          exitCode: null,
          signal: null,
          cause: {
            code: 'LF_POD_CREATE_FAILED',
            message: 'the cold fallback of a warm attempt could not create its pod',
          },
        });
      });
  }

  onAgentExit(listener: (exit: AgentExit) => void): void {
    this.#listeners.push(listener);
  }

  running(): number {
    return this.#o.inner.running() + this.#o.broker.waiting + this.#o.broker.held;
  }

  async close(): Promise<void> {
    for (const timer of this.#busyWaits.values()) clearTimeout(timer);
    this.#busyWaits.clear();
    this.#o.broker.close();
    await this.#o.inner.close();
  }

  async release(): Promise<void> {
    await (this.#o.inner.release ? this.#o.inner.release() : this.#o.inner.close());
  }

  #emit(exit: AgentExit): void {
    for (const l of this.#listeners) l(exit);
  }
}
