import { isActive, resolveKubernetesChoices } from '@leoflow/core';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type { AssignmentBroker } from '../assignments/assignment-broker.js';
import type {
  AgentExit,
  AttemptLaunch,
  ClaimProbe,
  Executor,
  PendingClaim,
  StartedAgent,
} from '../executor/executor.js';
import type { KubernetesTenantPlacement } from '../executor/kubernetes/pod-builder.js';
import { WORKER_POOL_ANNOTATION } from '../exchange/reviewed-pod.js';
import type { WarmPoolManager } from './pool-manager.js';

/** How long a warm-routed attempt may wait (for a worker, or for its ack) before it is lost. */
export const DEFAULT_WARM_WAIT_MS = 5 * 60_000;

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
  onError?: (err: unknown) => void;
}

function attemptKey(taskInstanceId: string, tryNumber: number): string {
  return `${taskInstanceId}#${tryNumber}`;
}

/**
 * The Kubernetes executor with warm pools in front. An attempt whose tenant, service account
 * and image — resolved exactly as the pod builder would — match a pool that has an idle worker
 * attached goes to that pool's broker (its token minted at hand-over, in-band); any other
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

  constructor(o: WarmRoutingOptions) {
    this.#o = o;
    this.name = o.inner.name;
    this.posture = o.inner.posture;
    this.#waitMs = o.waitMs ?? DEFAULT_WARM_WAIT_MS;
    o.inner.onAgentExit((exit) => this.#emit(exit));
  }

  warm(target: { agentUrl: string; heartbeatIntervalMs: number }): void {
    this.#o.inner.warm?.(target);
  }

  /** The pool this attempt would run in, or undefined (no pool, or its choice is refused). */
  poolOf(launch: AttemptLaunch): string | undefined {
    const placement = this.#o.placement(launch.identity.tenant_id);
    if (!placement) return undefined;
    let choice;
    try {
      choice = resolveKubernetesChoices(launch.task?.kubernetes, placement.allowlist);
    } catch {
      return undefined; // the cold path reports the refusal as it always has
    }
    return this.#o.manager.poolFor(launch.identity.tenant_id, choice.serviceAccount, choice.image);
  }

  start(launch: AttemptLaunch): Promise<StartedAgent | void> {
    const pool = this.poolOf(launch);
    const labels = pool ? { [WORKER_POOL_ANNOTATION]: pool } : undefined;
    if (!labels || !this.#o.broker.hasFreeWorkerFor(launch.identity.tenant_id, labels)) {
      return this.#o.inner.start(launch);
    }
    const { identity } = launch;
    this.#warm.set(attemptKey(identity.task_instance_id, identity.try_number), launch);
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
      this.#emit({
        identity: found.attempt.identity,
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
    for (const id of this.#o.broker.heldAttempts()) {
      const fence = await this.#o.store.getAttemptFence(id.task_instance_id);
      if (
        !fence ||
        fence.try_number !== id.try_number ||
        fence.dispatch_gen !== id.dispatch_gen ||
        !isActive(fence.state)
      ) {
        this.#o.broker.release(id.task_instance_id, id.try_number);
      }
    }
    this.#o.broker.expireUnacked();
    for (const waiting of this.#o.broker.waitingAttempts()) {
      const { task_instance_id, try_number, tenant_id } = waiting.identity;
      if (this.#o.broker.hasFreeWorkerFor(tenant_id, waiting.labels)) continue;
      const key = attemptKey(task_instance_id, try_number);
      const launch = this.#warm.get(key);
      if (!launch) continue;
      if (this.#o.broker.cancel(task_instance_id, try_number, 'cold fallback').was !== 'waiting') {
        continue;
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
              message: 'the cold fallback of an unacked warm assignment could not create its pod',
            },
          });
        });
    }
    // Attempts no longer in the broker (ended, released) are no longer warm ones.
    for (const [key, launch] of this.#warm) {
      const { task_instance_id, try_number } = launch.identity;
      if (this.#o.broker.stateOf(task_instance_id, try_number) === undefined)
        this.#warm.delete(key);
    }
  }

  onAgentExit(listener: (exit: AgentExit) => void): void {
    this.#listeners.push(listener);
  }

  running(): number {
    return this.#o.inner.running() + this.#o.broker.waiting + this.#o.broker.held;
  }

  async close(): Promise<void> {
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
