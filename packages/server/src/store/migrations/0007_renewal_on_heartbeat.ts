import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0007RenewalOnHeartbeat(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // The current try's renewals live on its task-instance row, written by the heartbeat's
      // own UPDATE: a renewing heartbeat used to be two statements (and two pages to commit),
      // and the second one dominated its cost. The attempt record's reads add them in; the
      // try bump folds them into the record and zeroes them, in its transaction.
      await db.schema
        .alterTable('task_instances')
        .addColumn('renewal_count', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema.alterTable('task_instances').addColumn('renewed_at', 'bigint').execute();
      await db.schema
        .alterTable('task_instances')
        .addColumn('renewed_credential_exp', 'bigint')
        .execute();
    },
  };
}
