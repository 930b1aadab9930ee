import type { Migration } from 'kysely';
import type { Db, DialectTypes } from './dialect.js';

export function migration0001Initial(t: DialectTypes): Migration {
  return {
    async up(db: Db): Promise<void> {
      await createDagTables(db, t);
      await createTaskTables(db, t);
    },
  };
}

/** Tenants, DAGs with their versions, and DAG runs. */
async function createDagTables(
  db: Db,
  { boolType, falseValue, boolCheck }: DialectTypes,
): Promise<void> {
  await db.schema
    .createTable('tenants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  let dags = db.schema
    .createTable('dags')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('dag_id', 'text', (c) => c.notNull())
    .addColumn('current_version', 'integer', (c) => c.notNull())
    .addColumn('is_paused', boolType, (c) => c.notNull().defaultTo(falseValue))
    .addColumn('last_scheduled_logical_date', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('dags_pk', ['tenant_id', 'dag_id'])
    .addForeignKeyConstraint('dags_tenant_fk', ['tenant_id'], 'tenants', ['id']);
  const pausedCheck = boolCheck('is_paused');
  if (pausedCheck) dags = dags.addCheckConstraint('dags_is_paused_bool', pausedCheck);
  await dags.execute();

  await db.schema
    .createTable('dag_versions')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('dag_id', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('spec_json', 'text', (c) => c.notNull())
    .addColumn('spec_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('dag_versions_pk', ['tenant_id', 'dag_id', 'version'])
    .addForeignKeyConstraint('dag_versions_tenant_fk', ['tenant_id'], 'tenants', ['id'])
    .execute();

  await db.schema
    .createTable('dag_runs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('dag_id', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('dag_version', 'integer', (c) => c.notNull())
    .addColumn('run_type', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('logical_date', 'bigint')
    .addColumn('data_interval_start', 'bigint')
    .addColumn('data_interval_end', 'bigint')
    .addColumn('conf_json', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('started_at', 'bigint')
    .addColumn('ended_at', 'bigint')
    .addUniqueConstraint('dag_runs_tenant_dag_run_uq', ['tenant_id', 'dag_id', 'run_id'])
    .addForeignKeyConstraint('dag_runs_tenant_fk', ['tenant_id'], 'tenants', ['id'])
    .execute();
  await db.schema.createIndex('dag_runs_state_idx').on('dag_runs').column('state').execute();
}

/** Task instances, their tries' history, XCom and task logs. */
async function createTaskTables(
  db: Db,
  { boolType, falseValue, blobType, boolCheck }: DialectTypes,
): Promise<void> {
  let tis = db.schema
    .createTable('task_instances')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('dag_run_id', 'text', (c) =>
      c.notNull().references('dag_runs.id').onDelete('cascade'),
    )
    .addColumn('dag_id', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text', (c) => c.notNull())
    .addColumn('try_number', 'integer', (c) => c.notNull())
    .addColumn('max_tries', 'integer', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('queued_at', 'bigint')
    .addColumn('started_at', 'bigint')
    .addColumn('ended_at', 'bigint')
    .addColumn('last_heartbeat_at', 'bigint')
    .addColumn('retry_at', 'bigint')
    .addColumn('exit_code', 'integer')
    .addColumn('error_message', 'text')
    .addColumn('hostname', 'text')
    .addColumn('pid', 'integer')
    .addColumn('terminate_requested', boolType, (c) => c.notNull().defaultTo(falseValue))
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('task_instances_run_task_uq', ['dag_run_id', 'task_id'])
    .addForeignKeyConstraint('task_instances_tenant_fk', ['tenant_id'], 'tenants', ['id']);
  const terminateCheck = boolCheck('terminate_requested');
  if (terminateCheck) {
    tis = tis.addCheckConstraint('task_instances_terminate_requested_bool', terminateCheck);
  }
  await tis.execute();
  await db.schema
    .createIndex('task_instances_state_idx')
    .on('task_instances')
    .column('state')
    .execute();
  await db.schema
    .createIndex('task_instances_tenant_dag_state_idx')
    .on('task_instances')
    .columns(['tenant_id', 'dag_id', 'state'])
    .execute();

  await db.schema
    .createTable('task_instance_history')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('dag_run_id', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text', (c) => c.notNull())
    .addColumn('try_number', 'integer', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('started_at', 'bigint')
    .addColumn('ended_at', 'bigint')
    .addColumn('exit_code', 'integer')
    .addColumn('error_message', 'text')
    .addColumn('archived_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('task_instance_history_attempt_uq', [
      'dag_run_id',
      'task_id',
      'try_number',
    ])
    .addForeignKeyConstraint('task_instance_history_tenant_fk', ['tenant_id'], 'tenants', ['id'])
    .execute();

  await db.schema
    .createTable('xcom')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('dag_run_id', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('value', blobType, (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('xcom_pk', ['dag_run_id', 'task_id', 'key'])
    .addForeignKeyConstraint('xcom_tenant_fk', ['tenant_id'], 'tenants', ['id'])
    .execute();

  await db.schema
    .createTable('task_logs')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('dag_run_id', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text', (c) => c.notNull())
    .addColumn('try_number', 'integer', (c) => c.notNull())
    .addColumn('line_number', 'integer', (c) => c.notNull())
    .addColumn('time', 'bigint', (c) => c.notNull())
    .addColumn('stream', 'text', (c) => c.notNull())
    .addColumn('message', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('task_logs_pk', ['dag_run_id', 'task_id', 'try_number', 'line_number'])
    .addForeignKeyConstraint('task_logs_tenant_fk', ['tenant_id'], 'tenants', ['id'])
    .execute();
}
