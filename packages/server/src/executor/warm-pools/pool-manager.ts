import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '@leoflow/core';
import { WARM_WORKER_RECYCLE_MESSAGE } from '@leoflow/protocol';
import type { WarmPoolConfig } from '../../config/warm-pool-config.js';
import type { WorkerTokenIssuer } from '../../auth/worker-token.js';
import type { WarmPoolMemberStore } from '../../store/ports/warm-pool-members.js';
import type { WarmPoolMemberRow, WarmPoolRecycleReason } from '../../store/types.js';
import {
  WORKER_POOL_ANNOTATION,
  type IssuedToken,
  type ReviewedPod,
  type WorkerBootstrap,
} from '../kubernetes/exchange/reviewed-pod.js';

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
  /**
   * the container ended; its termination message (WARM_WORKER_RECYCLE_MESSAGE, from
   * @leoflow/protocol, when something of an attempt survived)
   */
  finished: { terminationMessage: string } | null;
  deleting: boolean;
}

/** `unacked`: the worker let an assignment's ack deadline pass; it is not trusted with another. */
export type RecycleReason = WarmPoolRecycleReason;

/**
 * How long a recycled member's row stays in the store (its reason readable) before the leader's
 * reconcile prunes it. Its token is refused either way: a missing row serves nothing.
 */
export const RECYCLED_ROW_RETENTION_MS = 24 * 3_600_000;
/** How often the leader's reconcile prunes those rows (not on every pass). */
export const PRUNE_INTERVAL_MS = 10 * 60_000;

/** One pool pod, as its worker token names it. */
export interface MemberRef {
  poolKey: string;
  name: string;
  uid: string;
}

interface Pool {
  config: WarmPoolConfig;
  key: string;
}

/**
 * Keeps each pool's idle floor and implements the exchange's WorkerBootstrap: a pod the pool
 * created gets ONE worker-scoped token, ever; a pod it does not know, or already recycled, gets
 * null. Recycling follows the pool's limits (attempts, lifetime, idle TTL) or a worker's own
 * report that something of a previous attempt survived.
 *
 * The members live in the store (warm_pool_members), not in this process: every replica
 * answers a pod's exchange and its worker's RPCs from the same rows, the one-token-per-pod rule
 * is a conditional UPDATE, and a new leader's reconcile adopts the pods the old one created
 * (their attempt counts and idle clocks included). Only the lease holder reconciles.
 */
export class WarmPoolManager implements WorkerBootstrap {
  readonly #pools = new Map<string, Pool>();
  readonly #recycled: { poolKey: string; name: string; reason: RecycleReason }[] = [];
  /**
   * This process's writes per pod, in the order it made them: an ack's "busy" lands before the
   * attempt's end is written, and this process's reads of a pod see its own writes. Not a cache:
   * every read still goes to the store.
   */
  readonly #writes = new Map<string, Promise<unknown>>();
  /** attempt ends and recycles in flight (the pod's delete included), for settled() */
  readonly #inflight = new Set<Promise<unknown>>();
  #prunedAtMs = Number.NEGATIVE_INFINITY;

  constructor(
    pools: readonly WarmPoolConfig[],
    private readonly deps: {
      api: WorkerPodApi;
      tokens: WorkerTokenIssuer;
      clock: Clock;
      store: WarmPoolMemberStore;
    },
  ) {
    for (const config of pools) {
      const key = warmPoolKey(config);
      this.#pools.set(key, { config, key });
    }
  }

  /** The pool an attempt of this tenant / service account / image may use, if any. */
  poolFor(tenant: string, serviceAccount: string, image: string): string | undefined {
    const key = warmPoolKey({ tenant, serviceAccount, image });
    return this.#pools.has(key) ? key : undefined;
  }

  async issue(pod: ReviewedPod): Promise<IssuedToken | null> {
    const pool = this.#pools.get(pod.annotations[WORKER_POOL_ANNOTATION] ?? '');
    if (
      !pool ||
      pod.namespace !== pool.config.namespace ||
      pod.serviceAccount !== pool.config.serviceAccount
    ) {
      return null;
    }
    // One token per pod across every replica: exactly one conditional UPDATE wins.
    const won = await this.#serially(pod.uid, () =>
      this.deps.store.markWarmPoolMemberBootstrapped(pod.uid, {
        pool_key: pool.key,
        namespace: pod.namespace,
        pod_name: pod.name,
      }),
    );
    if (!won) return null;
    return this.deps.tokens.mint(
      { pool_key: pool.key, tenant_id: pool.config.tenant, pod_name: pod.name, pod_uid: pod.uid },
      this.deps.clock.now(),
    );
  }

  /**
   * The stored member a worker token names, while it serves (same pool, name and uid, not
   * recycled); undefined otherwise. One read by primary key.
   */
  async servingMember(ref: MemberRef): Promise<WarmPoolMemberRow | undefined> {
    if (!this.#pools.has(ref.poolKey)) return undefined;
    await this.#writes.get(ref.uid);
    const row = await this.deps.store.getWarmPoolMember(ref.uid);
    return row && row.pool_key === ref.poolKey && row.pod_name === ref.name && row.recycled === null
      ? row
      : undefined;
  }

  /** A worker token's pod is still a serving member (not recycled, same uid), on any replica. */
  async serving(poolKey: string, podName: string, podUid: string): Promise<boolean> {
    return (await this.servingMember({ poolKey, name: podName, uid: podUid })) !== undefined;
  }

  /** The worker took an attempt: busy, one attempt more (stored). */
  attemptStarted(ref: MemberRef): Promise<void> {
    return this.#track(async () => {
      await this.#serially(ref.uid, () => this.deps.store.startWarmPoolAttempt(ref.uid));
    });
  }

  /** The worker is idle again; recycled now if the stored attempt count reached the limit. */
  attemptFinished(ref: MemberRef): Promise<void> {
    return this.#track(async () => {
      const pool = this.#pools.get(ref.poolKey);
      if (!pool) return;
      const row = await this.#serially(ref.uid, () =>
        this.deps.store.finishWarmPoolAttempt(ref.uid, this.deps.clock.now()),
      );
      if (row && row.pool_key === ref.poolKey && row.attempts >= pool.config.maxAttemptsPerWorker)
        await this.recycle(ref, 'attempts');
    });
  }

  /**
   * Takes the pod out of service for good and deletes it; its token then opens nothing. The
   * reason is stored first, so every replica refuses the token before the pod is gone.
   */
  recycle(ref: MemberRef, reason: RecycleReason): Promise<void> {
    return this.#track(async () => {
      const pool = this.#pools.get(ref.poolKey);
      if (!pool) return;
      const recycled = await this.#serially(ref.uid, () =>
        this.deps.store.recycleWarmPoolMember(ref.uid, reason, this.deps.clock.now()),
      );
      if (!recycled) return; // already recycled (by this replica or another), or unknown
      this.#recycled.push({ poolKey: ref.poolKey, name: ref.name, reason });
      if (this.#recycled.length > 100) this.#recycled.shift();
      await this.deps.api.delete(pool.config.namespace, ref.name).catch(() => undefined);
    });
  }

  /**
   * Waits for this process's attempt starts, ends and recycles in flight (a stream's callbacks
   * start them without waiting), so a reconcile after a release sees the attempt's end.
   */
  async settled(): Promise<void> {
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight]);
  }

  /**
   * One pass (the lease holder's): prune old recycled rows; per pool, load the stored serving
   * members — a new leader's first pass adopts the previous leader's this way — and recycle
   * those whose pod is gone or finished (listed), past their lifetime or (above the floor) their
   * idle TTL; delete pool pods with no serving row (their tokens open nothing); then create pods
   * until the pool has min_idle idle ones, never more than max_size in all.
   */
  async reconcile(): Promise<void> {
    const now = this.deps.clock.now();
    if (now - this.#prunedAtMs >= PRUNE_INTERVAL_MS) {
      this.#prunedAtMs = now;
      await this.deps.store.pruneRecycledWarmPoolMembers(now - RECYCLED_ROW_RETENTION_MS);
    }
    for (const pool of this.#pools.values()) {
      const c = pool.config;
      let members = await this.deps.store.listServingWarmPoolMembers(pool.key);
      if (this.deps.api.list)
        members = await this.#sweepListed(
          pool,
          members,
          await this.deps.api.list(c.namespace, pool.key),
        );
      for (const m of [...members]) {
        if (now - m.created_at >= c.maxWorkerLifetimeMs && !m.busy) {
          await this.recycle(refOf(m), 'lifetime');
          members = members.filter((x) => x !== m);
        }
      }
      let idle = members.filter((m) => !m.busy);
      for (const m of [...idle].sort((a, b) => a.idle_since - b.idle_since)) {
        if (idle.length <= c.minIdle) break;
        if (now - m.idle_since >= c.idleTtlMs) {
          await this.recycle(refOf(m), 'idle');
          idle = idle.filter((x) => x !== m);
          members = members.filter((x) => x !== m);
        }
      }
      let idleCount = idle.length;
      let size = members.length;
      while (idleCount < c.minIdle && size < c.maxSize) {
        const name = `leoflow-worker-${pool.key.slice(3, 11)}-${randomBytes(4).toString('hex')}`;
        const { uid } = await this.deps.api.create({
          namespace: c.namespace,
          name,
          pool: c,
          poolKey: pool.key,
        });
        await this.deps.store.insertWarmPoolMember({
          pod_uid: uid,
          pool_key: pool.key,
          namespace: c.namespace,
          pod_name: name,
          tenant_id: c.tenant,
          created_at: now,
        });
        idleCount++;
        size++;
      }
    }
  }

  /** The members whose pod still lists under the same uid, running; the rest recycled. */
  async #sweepListed(
    pool: Pool,
    members: WarmPoolMemberRow[],
    listed: PoolPodState[],
  ): Promise<WarmPoolMemberRow[]> {
    const byName = new Map(listed.map((p) => [p.name, p]));
    const kept: WarmPoolMemberRow[] = [];
    for (const m of members) {
      const p = byName.get(m.pod_name);
      if (!p || p.uid !== m.pod_uid || p.deleting) {
        await this.recycle(refOf(m), 'gone');
      } else if (p.finished) {
        const survived = p.finished.terminationMessage.includes(WARM_WORKER_RECYCLE_MESSAGE);
        await this.recycle(refOf(m), survived ? 'survivor' : 'gone');
      } else {
        kept.push(m);
      }
    }
    const serving = new Set(kept.map((m) => m.pod_uid));
    for (const p of listed) {
      if (!serving.has(p.uid) && !p.deleting) {
        await this.deps.api.delete(pool.config.namespace, p.name).catch(() => undefined);
      }
    }
    return kept;
  }

  /** Why each pod left its pool by this process's hand, most recent last (tests and /metrics). */
  get recycled(): ReadonlyArray<{ poolKey: string; name: string; reason: RecycleReason }> {
    return this.#recycled;
  }

  /** The pool this worker token's pod belongs to, or undefined (for the assignment stream). */
  poolConfig(poolKey: string): WarmPoolConfig | undefined {
    return this.#pools.get(poolKey)?.config;
  }

  /** Serving members of a pool as stored, for tests and /metrics. */
  async members(
    poolKey: string,
  ): Promise<{ name: string; uid: string; attempts: number; busy: boolean }[]> {
    await this.settled();
    await Promise.allSettled([...this.#writes.values()]);
    const rows = await this.deps.store.listServingWarmPoolMembers(poolKey);
    return rows.map((m) => ({
      name: m.pod_name,
      uid: m.pod_uid,
      attempts: m.attempts,
      busy: m.busy,
    }));
  }

  #track<T>(op: () => Promise<T>): Promise<T> {
    const p = op();
    this.#inflight.add(p);
    const forget = () => this.#inflight.delete(p);
    p.then(forget, forget);
    return p;
  }

  /** Runs a write for this pod after the ones this process already started for it. */
  #serially<T>(uid: string, write: () => Promise<T>): Promise<T> {
    const prior = this.#writes.get(uid) ?? Promise.resolve();
    const next = prior.catch(() => undefined).then(write);
    const settled = next.catch(() => undefined);
    this.#writes.set(uid, settled);
    void settled.then(() => {
      if (this.#writes.get(uid) === settled) this.#writes.delete(uid);
    });
    return next;
  }
}

function refOf(m: WarmPoolMemberRow): MemberRef {
  return { poolKey: m.pool_key, name: m.pod_name, uid: m.pod_uid };
}
