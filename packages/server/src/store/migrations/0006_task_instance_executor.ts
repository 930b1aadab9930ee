import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0006TaskInstanceExecutor(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // The name of the executor holding the current claim, so terminate, revoke and the
      // reapers reach the right one after a restart. Null on claims made before this column
      // existed: those belong to the default executor.
      await db.schema.alterTable('task_instances').addColumn('executor', 'text').execute();
    },
  };
}
