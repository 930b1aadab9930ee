/** The lease the scheduler's leader holds in Pro (table scheduler_lease, migration 0007). */
export const SCHEDULER_LEASE = 'scheduler';

/**
 * The proof of leadership a work-creating scheduler write carries (a scheduled run, a claim).
 * The store applies such a write only while the proof still holds in the database, checked in
 * the same statement or transaction as the write, so a deposed leader's late write changes
 * nothing however its timing went (docs/pro.md, "Scheduler leadership").
 */
export type LeaderFence =
  /**
   * Lite: one process is the only scheduler there can be; there is nothing to check. Its
   * epoch is fixed, so logs read the same in both editions.
   */
  | { readonly kind: 'sole'; readonly epoch: number }
  /**
   * Pro: the write applies only while the lease row `name` carries this epoch and has not
   * expired by the database's clock.
   */
  | { readonly kind: 'lease'; readonly name: string; readonly epoch: number };
