import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0013SecretGrants(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // Secret grants (issue 34): the DAG id patterns that may declare a Variable or a
      // Connection, as a JSON array of strings; null (every existing row) grants it to every
      // DAG of the tenant, as before.
      await db.schema.alterTable('variables').addColumn('dag_grants', 'text').execute();
      await db.schema.alterTable('connections').addColumn('dag_grants', 'text').execute();
    },
  };
}
