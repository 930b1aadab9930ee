import type { Migration } from 'kysely';
import type { Db, DialectTypes } from './dialect.js';
import { rebuildSqlite } from './rebuild-sqlite.js';

export function migration0015TaskMapping(t: DialectTypes): Migration {
  const { dialect } = t;
  return {
    async up(db: Db): Promise<void> {
      // Dynamic task mapping (issue 41): a task instance is (run, task, map index), Airflow's
      // key, with -1 for a task that is not mapped. Its tries, logs and XCom are keyed by the
      // map index too, and the attempt record names it. `map_value` holds one map index's
      // arguments (JSON: env name -> value), fixed when the task is expanded; `decision_json`
      // a finished branch or short-circuit task's decision ({followed, skipped}).
      if (dialect === 'postgres') await keyByMapIndexOnPostgres(db);
      else await keyByMapIndexOnSqlite(db, t);
      await db.schema
        .alterTable('attempt_records')
        .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
        .execute();
    },
  };
}

/** PostgreSQL: new columns, and each key and unique index widened by the map index in place. */
async function keyByMapIndexOnPostgres(db: Db): Promise<void> {
  await db.schema
    .alterTable('task_instances')
    .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
    .execute();
  await db.schema.alterTable('task_instances').addColumn('map_value', 'text').execute();
  await db.schema.alterTable('task_instances').addColumn('decision_json', 'text').execute();
  await db.schema
    .alterTable('task_instances')
    .dropConstraint('task_instances_run_task_uq')
    .execute();
  await db.schema
    .alterTable('task_instances')
    .addUniqueConstraint('task_instances_run_task_map_uq', ['dag_run_id', 'task_id', 'map_index'])
    .execute();
  await db.schema
    .alterTable('task_instance_history')
    .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
    .execute();
  await db.schema
    .alterTable('task_instance_history')
    .dropConstraint('task_instance_history_attempt_uq')
    .execute();
  await db.schema
    .alterTable('task_instance_history')
    .addUniqueConstraint('task_instance_history_map_attempt_uq', [
      'dag_run_id',
      'task_id',
      'map_index',
      'try_number',
    ])
    .execute();
  await db.schema
    .alterTable('xcom')
    .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
    .execute();
  await db.schema.alterTable('xcom').dropConstraint('xcom_pk').execute();
  await db.schema
    .alterTable('xcom')
    .addPrimaryKeyConstraint('xcom_map_pk', ['dag_run_id', 'task_id', 'map_index', 'key'])
    .execute();
  await db.schema
    .alterTable('task_logs')
    .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
    .execute();
  await db.schema.alterTable('task_logs').dropConstraint('task_logs_pk').execute();
  await db.schema
    .alterTable('task_logs')
    .addPrimaryKeyConstraint('task_logs_map_pk', [
      'dag_run_id',
      'task_id',
      'map_index',
      'try_number',
      'line_number',
    ])
    .execute();
}

/** SQLite: the same, by rebuilding each table (it cannot drop a table constraint). */
async function keyByMapIndexOnSqlite(
  db: Db,
  { boolType, falseValue, blobType, boolCheck }: DialectTypes,
): Promise<void> {
  // SQLite cannot drop a table constraint: each table is rebuilt with the new key, its
  // rows copied (map index -1), and swapped in. No table references these four, so
  // dropping them breaks no foreign key.
  await rebuildSqlite(db, 'task_instances', async (name) => {
    let t = db.schema
      .createTable(name)
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
      .addColumn('credential_revoked_try', 'integer')
      .addColumn('dispatch_gen', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('executor', 'text')
      .addColumn('renewal_count', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('renewed_at', 'bigint')
      .addColumn('renewed_credential_exp', 'bigint')
      .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
      .addColumn('map_value', 'text')
      .addColumn('decision_json', 'text')
      .addUniqueConstraint('task_instances_run_task_map_uq', ['dag_run_id', 'task_id', 'map_index'])
      .addForeignKeyConstraint('task_instances_tenant_fk', ['tenant_id'], 'tenants', ['id']);
    const check = boolCheck('terminate_requested');
    if (check) t = t.addCheckConstraint('task_instances_terminate_requested_bool', check);
    await t.execute();
  });
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
  await rebuildSqlite(db, 'task_instance_history', (name) =>
    db.schema
      .createTable(name)
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
      .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
      .addUniqueConstraint('task_instance_history_map_attempt_uq', [
        'dag_run_id',
        'task_id',
        'map_index',
        'try_number',
      ])
      .addForeignKeyConstraint('task_instance_history_tenant_fk', ['tenant_id'], 'tenants', ['id'])
      .execute(),
  );
  await rebuildSqlite(db, 'xcom', (name) =>
    db.schema
      .createTable(name)
      .addColumn('tenant_id', 'text', (c) => c.notNull())
      .addColumn('dag_run_id', 'text', (c) => c.notNull())
      .addColumn('task_id', 'text', (c) => c.notNull())
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('value', blobType, (c) => c.notNull())
      .addColumn('content_type', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
      .addPrimaryKeyConstraint('xcom_map_pk', ['dag_run_id', 'task_id', 'map_index', 'key'])
      .addForeignKeyConstraint('xcom_tenant_fk', ['tenant_id'], 'tenants', ['id'])
      .execute(),
  );
  await rebuildSqlite(db, 'task_logs', (name) =>
    db.schema
      .createTable(name)
      .addColumn('tenant_id', 'text', (c) => c.notNull())
      .addColumn('dag_run_id', 'text', (c) => c.notNull())
      .addColumn('task_id', 'text', (c) => c.notNull())
      .addColumn('try_number', 'integer', (c) => c.notNull())
      .addColumn('line_number', 'integer', (c) => c.notNull())
      .addColumn('time', 'bigint', (c) => c.notNull())
      .addColumn('stream', 'text', (c) => c.notNull())
      .addColumn('message', 'text', (c) => c.notNull())
      .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
      .addPrimaryKeyConstraint('task_logs_map_pk', [
        'dag_run_id',
        'task_id',
        'map_index',
        'try_number',
        'line_number',
      ])
      .addForeignKeyConstraint('task_logs_tenant_fk', ['tenant_id'], 'tenants', ['id'])
      .execute(),
  );
}
