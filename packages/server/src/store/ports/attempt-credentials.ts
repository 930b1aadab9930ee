import type { AttemptRecordKey } from '../types.js';

/**
 * An attempt's credential as the task-instance row sees it: revoked or not, and whether the
 * try it names is still live; and, for any try, its revocation on the attempt's record.
 */
export interface AttemptCredentialStore {
  /**
   * Marks one attempt's credential revoked on its record, creating the record when the attempt
   * never registered; true when this call revoked it, false when it already was.
   */
  revokeAttemptRecord(key: AttemptRecordKey, now: number): Promise<boolean>;
  /** Whether the attempt's record says its credential was revoked (false without a record). */
  isAttemptRecordRevoked(task_instance_id: string, try_number: number): Promise<boolean>;
  /** Marks one attempt's credential revoked (a column on the task instance, reset by retry/clear). */
  revokeAttemptCredential(
    task_instance_id: string,
    try_number: number,
    now: number,
  ): Promise<boolean>;
  /**
   * IsTaskInstanceLive + revocation in one indexed read: the row for (dag_run_id, task_id,
   * map_index) exists, carries try_number, and is queued|running. Nothing else — no recency,
   * run-state or date term. The map index is part of the key (seed 001's D3): a mapped task's
   * indexes share run, task and usually try, so without it one index's credential would read
   * another index's liveness.
   */
  getAttemptLiveness(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    /** when given, the row must also be on this dispatch of the try (a reset claim moved on) */
    dispatch_gen?: number,
    /** the task instance's map index; -1 (the default) for a task that is not mapped */
    map_index?: number,
  ): Promise<{ live: boolean; revoked: boolean }>;
}
