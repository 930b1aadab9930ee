import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0011AttemptExchange(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // The pod that exchanged for an attempt (its uid and dispatch generation): the token
      // exchange's once-per-attempt rule, held in the database so it holds across replicas.
      // A later dispatch of the same try (a higher generation) may bind its own pod.
      await db.schema
        .alterTable('attempt_records')
        .addColumn('exchanged_pod_uid', 'text')
        .execute();
      await db.schema
        .alterTable('attempt_records')
        .addColumn('exchanged_dispatch_gen', 'integer')
        .execute();
    },
  };
}
