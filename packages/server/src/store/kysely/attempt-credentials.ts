import { isActive, type TaskInstanceState } from '@leoflow/core';
import type { AttemptCredentialStore } from '../ports/attempt-credentials.js';
import type { AttemptRecordKey } from '../types.js';
import { changed } from './columns.js';
import { KyselySeam } from './seam.js';

/**
 * Attempt-credential revocation and liveness, on the task-instance row. On SQLite the liveness
 * read goes through the hot-read connection when there is one.
 */
export class KyselyAttemptCredentialStore extends KyselySeam implements AttemptCredentialStore {
  async revokeAttemptCredential(
    task_instance_id: string,
    try_number: number,
    _now: number,
  ): Promise<boolean> {
    // Pinned to the try: revoking an attempt that has already been superseded must not reach
    // the new one. updated_at stays: it orders the scheduler's queue, and this is no state change.
    const res = await this.db
      .updateTable('task_instances')
      .set({ credential_revoked_try: try_number })
      .where('id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async revokeAttemptRecord(key: AttemptRecordKey, now: number): Promise<boolean> {
    await this.db
      .insertInto('attempt_records')
      .values({ ...key, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['task_instance_id', 'try_number']).doNothing())
      .execute();
    const res = await this.db
      .updateTable('attempt_records')
      .set({ credential_revoked_at: now, updated_at: now })
      .where('task_instance_id', '=', key.task_instance_id)
      .where('try_number', '=', key.try_number)
      .where('credential_revoked_at', 'is', null)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async isAttemptRecordRevoked(task_instance_id: string, try_number: number): Promise<boolean> {
    const row = await this.db
      .selectFrom('attempt_records')
      .select('credential_revoked_at')
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .executeTakeFirst();
    return row?.credential_revoked_at != null;
  }

  async getAttemptLiveness(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    dispatch_gen?: number,
    map_index = -1,
  ): Promise<{ live: boolean; revoked: boolean }> {
    // One read on the (dag_run_id, task_id, map_index) unique index. Deliberately nothing about
    // the run, its age or its logical date: a year-old run that was cleared must work again.
    if (this.hot !== undefined)
      return this.hot.attemptLiveness(dag_run_id, task_id, try_number, dispatch_gen, map_index);
    const row = await this.db
      .selectFrom('task_instances')
      .select(['state', 'credential_revoked_try', 'dispatch_gen'])
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('map_index', '=', map_index)
      .where('try_number', '=', try_number)
      .executeTakeFirst();
    if (row === undefined) return { live: false, revoked: false };
    return {
      live:
        isActive(row.state as TaskInstanceState) &&
        (dispatch_gen === undefined || row.dispatch_gen === dispatch_gen),
      revoked: row.credential_revoked_try === try_number,
    };
  }
}
