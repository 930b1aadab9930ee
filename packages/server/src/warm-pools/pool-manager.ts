import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '@leoflow/core';
import type { WarmPoolConfig } from '../config/warm-pool-config.js';
import type { WorkerTokenIssuer } from '../auth/worker-token.js';
import {
  WORKER_POOL_ANNOTATION,
  type IssuedToken,
  type ReviewedPod,
  type WorkerBootstrap,
} from '../exchange/reviewed-pod.js';

/**
 * A pool's key: what isolates it. Tenant, service account and image — never the DAG or the
 * task — so an attempt only lands in a pod that served that same tenant, identity and image.
 */
export function warmPoolKey(
  pool: Pick<WarmPoolConfig, 'tenant' | 'serviceAccount' | 'image'>,
): string {
  const h = createHash('sha256')
    .update(`${pool.tenant}\u0000${pool.serviceAccount}\u0000${pool.image}`)
    .digest('hex');
  return `wp-${h.slice(0, 16)}`;
}

/** The Kubernetes side the manager needs (the executor's CoreV1Api in production). */
export interface WorkerPodApi {
  /** creates the worker pod (annotated with the pool key, no credential); returns its uid */
  create(pod: {
    namespace: string;
    name: string;
    pool: WarmPoolConfig;
    poolKey: string;
  }): Promise<{ uid: string }>;
  delete(namespace: string, name: string): Promise<void>;
  /**
   * The pool's pods as the apiserver has them (by the pool's label). Optional: without it the
   * manager cannot notice a pod that died or was deleted behind its back.
   */
  list?(namespace: string, poolKey: string): Promise<PoolPodState[]>;
}

/** One pool pod, as listed. */
export interface PoolPodState {
  name: string;
  uid: string;
  /** the container ended; its termination message ("survivor" when an attempt left a trace) */
  finished: { terminationMessage: string } | null;
  deleting: boolean;
}

/** The word a worker writes to its termination message when something of an attempt survived. */
export const SURVIVOR_MESSAGE = 'survivor';

/** `unacked`: the worker let an assignment's ack deadline pass; it is not trusted with another. */
export type RecycleReason = 'attempts' | 'lifetime' | 'idle' | 'survivor' | 'gone' | 'unacked';

interface Member {
  name: string;
  uid: string;
  createdAtMs: number;
  /** the worker token was issued (once per pod) */
  bootstrapped: boolean;
  attempts: number;
  busy: boolean;
  idleSinceMs: number;
  recycled: RecycleReason | null;
}

interface Pool {
  config: WarmPoolConfig;
  key: string;
  members: Map<string, Member>;
}

/**
 * Keeps each pool's idle floor and implements the exchange's WorkerBootstrap: a pod the manager
 * created gets ONE worker-scoped token, ever; a pod it does not know, or already recycled, gets
 * null. Recycling follows the pool's limits (attempts, lifetime, idle TTL) or a worker's own
 * report that something of a previous attempt survived.
 */
export class WarmPoolManager implements WorkerBootstrap {
  readonly #pools = new Map<string, Pool>();
  readonly #recycled: { poolKey: string; name: string; reason: RecycleReason }[] = [];

  constructor(
    pools: readonly WarmPoolConfig[],
    private readonly deps: { api: WorkerPodApi; tokens: WorkerTokenIssuer; clock: Clock },
  ) {
    for (const config of pools) {
      const key = warmPoolKey(config);
      this.#pools.set(key, { config, key, members: new Map() });
    }
  }

  /** The pool an attempt of this tenant / service account / image may use, if any. */
  poolFor(tenant: string, serviceAccount: string, image: string): string | undefined {
    const key = warmPoolKey({ tenant, serviceAccount, image });
    return this.#pools.has(key) ? key : undefined;
  }

  async issue(pod: ReviewedPod): Promise<IssuedToken | null> {
    const pool = this.#pools.get(pod.annotations[WORKER_POOL_ANNOTATION] ?? '');
    if (!pool) return null;
    const m = pool.members.get(pod.name);
    if (
      !m ||
      m.uid !== pod.uid ||
      m.bootstrapped ||
      m.recycled !== null ||
      pod.namespace !== pool.config.namespace ||
      pod.serviceAccount !== pool.config.serviceAccount
    ) {
      return null;
    }
    m.bootstrapped = true;
    return this.deps.tokens.mint(
      { pool_key: pool.key, tenant_id: pool.config.tenant, pod_name: m.name, pod_uid: m.uid },
      this.deps.clock.now(),
    );
  }

  /** A worker token's pod is still a serving member (not recycled, same uid). */
  serving(poolKey: string, podName: string, podUid: string): boolean {
    const m = this.#pools.get(poolKey)?.members.get(podName);
    return m !== undefined && m.uid === podUid && m.recycled === null;
  }

  /** The worker took an attempt. */
  attemptStarted(poolKey: string, podName: string): void {
    const m = this.#pools.get(poolKey)?.members.get(podName);
    if (!m) return;
    m.busy = true;
    m.attempts++;
  }

  /** The worker is idle again; recycled now if the attempt count reached the limit. */
  async attemptFinished(poolKey: string, podName: string): Promise<void> {
    const pool = this.#pools.get(poolKey);
    const m = pool?.members.get(podName);
    if (!pool || !m) return;
    m.busy = false;
    m.idleSinceMs = this.deps.clock.now();
    if (m.attempts >= pool.config.maxAttemptsPerWorker)
      await this.recycle(poolKey, podName, 'attempts');
  }

  /** Takes the pod out of service for good and deletes it; its token then opens nothing. */
  async recycle(poolKey: string, podName: string, reason: RecycleReason): Promise<void> {
    const pool = this.#pools.get(poolKey);
    const m = pool?.members.get(podName);
    if (!pool || !m || m.recycled) return;
    m.recycled = reason;
    pool.members.delete(podName);
    this.#recycled.push({ poolKey, name: podName, reason });
    if (this.#recycled.length > 100) this.#recycled.shift();
    await this.deps.api.delete(pool.config.namespace, podName).catch(() => undefined);
  }

  /**
   * One pass: recycle members whose pod is gone or finished (listed), past their lifetime or
   * (above the floor) their idle TTL; delete pool pods this process does not know (a previous
   * process's: their tokens open nothing here); then create pods until each pool has min_idle
   * idle ones, never more than max_size in all.
   */
  async reconcile(): Promise<void> {
    const now = this.deps.clock.now();
    for (const pool of this.#pools.values()) {
      const c = pool.config;
      if (this.deps.api.list)
        await this.#sweepListed(pool, await this.deps.api.list(c.namespace, pool.key));
      for (const m of [...pool.members.values()]) {
        if (now - m.createdAtMs >= c.maxWorkerLifetimeMs && !m.busy) {
          await this.recycle(pool.key, m.name, 'lifetime');
        }
      }
      let idle = [...pool.members.values()].filter((m) => !m.busy);
      for (const m of idle.sort((a, b) => a.idleSinceMs - b.idleSinceMs)) {
        if (idle.length <= c.minIdle) break;
        if (now - m.idleSinceMs >= c.idleTtlMs) {
          await this.recycle(pool.key, m.name, 'idle');
          idle = idle.filter((x) => x !== m);
        }
      }
      while (idle.length < c.minIdle && pool.members.size < c.maxSize) {
        const name = `leoflow-worker-${pool.key.slice(3, 11)}-${randomBytes(4).toString('hex')}`;
        const { uid } = await this.deps.api.create({
          namespace: c.namespace,
          name,
          pool: c,
          poolKey: pool.key,
        });
        const m: Member = {
          name,
          uid,
          createdAtMs: now,
          bootstrapped: false,
          attempts: 0,
          busy: false,
          idleSinceMs: now,
          recycled: null,
        };
        pool.members.set(name, m);
        idle.push(m);
      }
    }
  }

  async #sweepListed(pool: Pool, listed: PoolPodState[]): Promise<void> {
    const byName = new Map(listed.map((p) => [p.name, p]));
    for (const m of [...pool.members.values()]) {
      const p = byName.get(m.name);
      if (!p || p.uid !== m.uid || p.deleting) {
        await this.recycle(pool.key, m.name, 'gone');
      } else if (p.finished) {
        const survived = p.finished.terminationMessage.includes(SURVIVOR_MESSAGE);
        await this.recycle(pool.key, m.name, survived ? 'survivor' : 'gone');
      }
    }
    for (const p of listed) {
      if (!pool.members.has(p.name) && !p.deleting) {
        await this.deps.api.delete(pool.config.namespace, p.name).catch(() => undefined);
      }
    }
  }

  /** Why each pod left its pool, most recent last (tests and /metrics). */
  get recycled(): ReadonlyArray<{ poolKey: string; name: string; reason: RecycleReason }> {
    return this.#recycled;
  }

  /** The pool this worker token's pod belongs to, or undefined (for the assignment stream). */
  poolConfig(poolKey: string): WarmPoolConfig | undefined {
    return this.#pools.get(poolKey)?.config;
  }

  /** Members of a pool, for tests and /metrics. */
  members(poolKey: string): { name: string; uid: string; attempts: number; busy: boolean }[] {
    return [...(this.#pools.get(poolKey)?.members.values() ?? [])].map((m) => ({
      name: m.name,
      uid: m.uid,
      attempts: m.attempts,
      busy: m.busy,
    }));
  }
}
