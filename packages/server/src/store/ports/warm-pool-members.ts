import type { WarmPoolMemberRow, WarmPoolRecycleReason } from '../types.js';

/**
 * Warm-pool members, shared by every replica (docs/kubernetes.md, "Warm pools"). Every write is
 * one conditional UPDATE on the row's primary key (the pod uid) that touches only a serving row
 * (`recycled is null`), so two replicas racing on one pod settle in the database, never in a
 * replica's memory.
 */
export interface WarmPoolMemberStore {
  /** a pod the pool just created: serving, not bootstrapped, no attempts, idle since created_at */
  insertWarmPoolMember(
    row: Pick<
      WarmPoolMemberRow,
      'pod_uid' | 'pool_key' | 'namespace' | 'pod_name' | 'tenant_id' | 'created_at'
    >,
  ): Promise<void>;
  /** the row, serving or recycled; undefined when there is none (never created, or pruned) */
  getWarmPoolMember(pod_uid: string): Promise<WarmPoolMemberRow | undefined>;
  /** the pool's serving members (recycled is null), oldest first */
  listServingWarmPoolMembers(pool_key: string): Promise<WarmPoolMemberRow[]>;
  /**
   * The one worker token per pod: marks the row bootstrapped only if it is this pool's pod by
   * that name and namespace, still serving and not bootstrapped yet. True for exactly one
   * caller, whichever replica it runs on; the caller mints only then.
   */
  markWarmPoolMemberBootstrapped(
    pod_uid: string,
    expect: Pick<WarmPoolMemberRow, 'pool_key' | 'namespace' | 'pod_name'>,
  ): Promise<boolean>;
  /** the worker took an attempt: busy, attempts + 1 (serving rows only); false if not serving */
  startWarmPoolAttempt(pod_uid: string): Promise<boolean>;
  /**
   * The worker is free again: not busy, idle since `now` (serving rows only). The row as it is
   * now (its attempt count decides the recycle), or undefined when it no longer serves.
   */
  finishWarmPoolAttempt(pod_uid: string, now: number): Promise<WarmPoolMemberRow | undefined>;
  /**
   * Takes the member out of service for good (written before its pod is deleted). True for the
   * one call that recycled it; false when it was already recycled or has no row.
   */
  recycleWarmPoolMember(
    pod_uid: string,
    reason: WarmPoolRecycleReason,
    now: number,
  ): Promise<boolean>;
  /** Removes rows recycled at or before `before`; how many went. A missing row refuses too. */
  pruneRecycledWarmPoolMembers(before: number): Promise<number>;
}
