import type { Migration } from 'kysely';
import type { Db, DialectTypes } from './dialect.js';

export function migration0018DagFolder({ boolType, trueValue }: DialectTypes): Migration {
  return {
    async up(db: Db): Promise<void> {
      // The watched DAGs folder (issue 40): which file a DAG came from, whether that file is still
      // there (a removed file's DAG is inactive: no scheduled runs), and the files that do not load.
      await db.schema.alterTable('dags').addColumn('source_file', 'text').execute();
      await db.schema
        .alterTable('dags')
        .addColumn('is_active', boolType, (c) => c.notNull().defaultTo(trueValue))
        .execute();
      await db.schema
        .createTable('dag_import_errors')
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('file', 'text', (c) => c.notNull())
        .addColumn('dag_id', 'text')
        .addColumn('diagnostics_json', 'text', (c) => c.notNull())
        .addColumn('first_seen_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('dag_import_errors_pk', ['tenant_id', 'file'])
        .addForeignKeyConstraint('dag_import_errors_tenant_fk', ['tenant_id'], 'tenants', ['id'])
        .execute();
    },
  };
}
