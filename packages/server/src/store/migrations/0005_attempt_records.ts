import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0005AttemptRecords(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // One row per attempt (task instance + try): what its credential was used for. Names
      // only, never values. The session hash binds post-exp Heartbeat/ReportState to the
      // agent process that registered (SHA-256 of a key only that process holds).
      await db.schema
        .createTable('attempt_records')
        .addColumn('task_instance_id', 'text', (c) => c.notNull())
        .addColumn('try_number', 'integer', (c) => c.notNull())
        .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
        .addColumn('dag_id', 'text', (c) => c.notNull())
        .addColumn('dag_run_id', 'text', (c) => c.notNull())
        .addColumn('run_id', 'text', (c) => c.notNull())
        .addColumn('task_id', 'text', (c) => c.notNull())
        .addColumn('session_hash', 'text')
        .addColumn('registered_at', 'bigint')
        .addColumn('scoping_mode', 'text')
        .addColumn('liveness_mode', 'text')
        .addColumn('variables_delivered', 'text')
        .addColumn('connections_delivered', 'text')
        .addColumn('variables_refusal', 'text')
        .addColumn('connections_refusal', 'text')
        .addColumn('renewals', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('last_renewed_at', 'bigint')
        .addColumn('renewal_stopped', 'text')
        .addColumn('credential_exp', 'bigint')
        // D5: {"variables":[…],"connections":[…]} read through the SDK but not declared
        .addColumn('undeclared_reads', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('attempt_records_pk', ['task_instance_id', 'try_number'])
        .execute();
      await db.schema
        .createIndex('attempt_records_run_idx')
        .on('attempt_records')
        .columns(['dag_run_id', 'task_id'])
        .execute();
      await db.schema
        .createIndex('attempt_records_tenant_dag_idx')
        .on('attempt_records')
        .columns(['tenant_id', 'dag_id'])
        .execute();
    },
  };
}
