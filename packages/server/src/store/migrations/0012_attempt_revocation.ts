import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0012AttemptRevocation(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // Revocation of any attempt that still verifies (issue 34): a try a retry or clear
      // superseded is no longer the task-instance row's, so its revocation is kept on its
      // record (the row's credential_revoked_try still carries the current try's).
      await db.schema
        .alterTable('attempt_records')
        .addColumn('credential_revoked_at', 'bigint')
        .execute();
    },
  };
}
