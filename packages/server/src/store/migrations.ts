import type { Kysely, Migration, MigrationProvider } from 'kysely';
import { sql } from 'kysely';

export type StoreDialect = 'sqlite' | 'postgres';

// Migrations are typed against Kysely<any> on purpose: each one must keep compiling against
// the schema as it was when it was written, not against today's Database interface.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above: Kysely's advice for migrations
type Db = Kysely<any>;

/**
 * The one ordered migration list for both dialects. Names sort lexically, which is the order
 * Kysely applies them in; never rename or edit a released entry, append a new one.
 */
export function migrations(dialect: StoreDialect): Record<string, Migration> {
  // SQLite has no boolean type and binds no JS booleans; PostgreSQL gets a real BOOLEAN so
  // that people reading the database directly see true/false.
  const boolType = dialect === 'postgres' ? 'boolean' : 'integer';
  const falseValue = dialect === 'postgres' ? false : 0;
  const blobType = dialect === 'postgres' ? 'bytea' : 'blob';

  const boolCheck = (column: string) =>
    dialect === 'sqlite' ? sql`${sql.ref(column)} in (0, 1)` : undefined;

  return {
    '0001_initial': {
      async up(db: Db): Promise<void> {
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
          .addForeignKeyConstraint('task_instance_history_tenant_fk', ['tenant_id'], 'tenants', [
            'id',
          ])
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
          .addPrimaryKeyConstraint('task_logs_pk', [
            'dag_run_id',
            'task_id',
            'try_number',
            'line_number',
          ])
          .addForeignKeyConstraint('task_logs_tenant_fk', ['tenant_id'], 'tenants', ['id'])
          .execute();
      },
    },

    '0002_vault': {
      async up(db: Db): Promise<void> {
        // The checks make "a secret stored in the clear" and "ciphertext without the id of the
        // key that sealed it" unrepresentable, whatever code writes the row.
        const isTrue = (column: string) =>
          dialect === 'postgres' ? sql`${sql.ref(column)}` : sql`${sql.ref(column)} = 1`;
        const isFalse = (column: string) =>
          dialect === 'postgres' ? sql`not ${sql.ref(column)}` : sql`${sql.ref(column)} = 0`;

        let variables = db.schema
          .createTable('variables')
          .addColumn('tenant_id', 'text', (c) => c.notNull())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('value_text', 'text')
          .addColumn('value_cipher', blobType)
          .addColumn('key_id', 'text')
          .addColumn('is_secret', boolType, (c) => c.notNull().defaultTo(falseValue))
          .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('variables_pk', ['tenant_id', 'key'])
          .addForeignKeyConstraint('variables_tenant_fk', ['tenant_id'], 'tenants', ['id'])
          .addCheckConstraint(
            'variables_sealed_iff_secret',
            sql`(${isTrue('is_secret')} and value_text is null and value_cipher is not null and key_id is not null)
             or (${isFalse('is_secret')} and value_text is not null and value_cipher is null and key_id is null)`,
          );
        const secretCheck = boolCheck('is_secret');
        if (secretCheck) {
          variables = variables.addCheckConstraint('variables_is_secret_bool', secretCheck);
        }
        await variables.execute();
        await db.schema
          .createIndex('variables_key_id_idx')
          .on('variables')
          .column('key_id')
          .execute();

        await db.schema
          .createTable('connections')
          .addColumn('tenant_id', 'text', (c) => c.notNull())
          .addColumn('conn_id', 'text', (c) => c.notNull())
          .addColumn('conn_type', 'text', (c) => c.notNull())
          .addColumn('host', 'text')
          .addColumn('login', 'text')
          .addColumn('schema', 'text')
          .addColumn('port', 'integer')
          .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
          .addColumn('secret_cipher', blobType)
          .addColumn('key_id', 'text')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('connections_pk', ['tenant_id', 'conn_id'])
          .addForeignKeyConstraint('connections_tenant_fk', ['tenant_id'], 'tenants', ['id'])
          .addCheckConstraint(
            'connections_cipher_has_key_id',
            sql`(secret_cipher is null) = (key_id is null)`,
          )
          .execute();
        await db.schema
          .createIndex('connections_key_id_idx')
          .on('connections')
          .column('key_id')
          .execute();

        // No foreign key to tenants: an audit write must never fail because of what it
        // records, and the trail has to outlive anything it talks about.
        await db.schema
          .createTable('audit_log')
          .addColumn('id', dialect === 'postgres' ? 'bigserial' : 'integer', (c) =>
            dialect === 'postgres' ? c.primaryKey() : c.primaryKey().autoIncrement(),
          )
          .addColumn('tenant_id', 'text', (c) => c.notNull())
          .addColumn('at', 'bigint', (c) => c.notNull())
          .addColumn('actor', 'text', (c) => c.notNull())
          .addColumn('action', 'text', (c) => c.notNull())
          .addColumn('resource_type', 'text', (c) => c.notNull())
          .addColumn('resource_id', 'text', (c) => c.notNull())
          .addColumn('request_id', 'text')
          .addColumn('payload_json', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('audit_log_tenant_at_idx')
          .on('audit_log')
          .columns(['tenant_id', 'at'])
          .execute();
        await db.schema
          .createIndex('audit_log_tenant_action_idx')
          .on('audit_log')
          .columns(['tenant_id', 'action'])
          .execute();

        // Revoked iff equal to the row's try_number: retry and clear bump the try, so the new
        // attempt starts un-revoked without anyone having to remember to reset the column.
        await db.schema
          .alterTable('task_instances')
          .addColumn('credential_revoked_try', 'integer')
          .execute();
      },
    },
    '0003_api_tokens': {
      async up(db: Db): Promise<void> {
        // One row per user API token ever minted, keyed by its jti: a token whose jti is not
        // here, or is revoked here, is refused even though its signature verifies. The token
        // itself is never stored (it is a bearer credential; the row is enough to refuse it).
        await db.schema
          .createTable('api_tokens')
          .addColumn('jti', 'text', (c) => c.primaryKey())
          .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('role', 'text', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('expires_at', 'bigint')
          .addColumn('revoked_at', 'bigint')
          .addColumn('revoked_by', 'text')
          .execute();
        await db.schema
          .createIndex('api_tokens_tenant_idx')
          .on('api_tokens')
          .columns(['tenant_id', 'created_at'])
          .execute();
      },
    },
    '0004_dispatch_generation': {
      async up(db: Db): Promise<void> {
        // Which dispatch of the current try holds the live credential. A claim (scheduled →
        // queued) bumps it and stamps it into the agent token; an orphaned claim reset to
        // scheduled keeps its try, so this — not the try — is what fences the old credential.
        await db.schema
          .alterTable('task_instances')
          .addColumn('dispatch_gen', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
    '0005_attempt_records': {
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
    },
    '0006_task_instance_executor': {
      async up(db: Db): Promise<void> {
        // The name of the executor holding the current claim, so terminate, revoke and the
        // reapers reach the right one after a restart. Null on claims made before this column
        // existed: those belong to the default executor.
        await db.schema.alterTable('task_instances').addColumn('executor', 'text').execute();
      },
    },
    '0007_renewal_on_heartbeat': {
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
    },
    '0008_scheduler_lease': {
      async up(db: Db): Promise<void> {
        // Pro's scheduler leadership (docs/pro.md, "Scheduler leadership"): one row per lease.
        // epoch grows by one on every acquisition and fences the holder's writes; the times are
        // epoch ms read from the database's own clock, never a replica's. Created on SQLite
        // too, so both dialects keep one schema; Lite's sole scheduler never reads it.
        await db.schema
          .createTable('scheduler_lease')
          .addColumn('name', 'text', (c) => c.primaryKey())
          .addColumn('holder', 'text', (c) => c.notNull())
          .addColumn('epoch', 'bigint', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .addColumn('renewed_at', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    '0009_ui_sessions': {
      async up(db: Db): Promise<void> {
        // Web app sessions (docs/ui.md), so a restart does not sign browsers out. The key is
        // the SHA-256 of the cookie value, never the value; the API token behind a session is
        // named by its jti (the token itself is never stored), and re-checked on every request.
        await db.schema
          .createTable('ui_sessions')
          .addColumn('id_hash', 'text', (c) => c.primaryKey())
          .addColumn('tenant_id', 'text', (c) => c.notNull())
          .addColumn('token_jti', 'text', (c) => c.notNull())
          .addColumn('subject', 'text', (c) => c.notNull())
          .addColumn('role', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('ui_sessions_expires_idx')
          .on('ui_sessions')
          .column('expires_at')
          .execute();
      },
    },
    '0010_warm_pool_members': {
      async up(db: Db): Promise<void> {
        // Warm-pool members (docs/kubernetes.md, "Warm pools"), so every replica answers a
        // worker's exchange and RPCs alike and a failover keeps the pool's pods. Keyed by the
        // pod uid: the apiserver never reuses one, and the worker token names it. `recycled` is
        // written before the pod is deleted and never cleared; the row is pruned later. The
        // worker token itself is never stored (nor anything the pod bootstraps with).
        let members = db.schema
          .createTable('warm_pool_members')
          .addColumn('pod_uid', 'text', (c) => c.primaryKey())
          .addColumn('pool_key', 'text', (c) => c.notNull())
          .addColumn('namespace', 'text', (c) => c.notNull())
          .addColumn('pod_name', 'text', (c) => c.notNull())
          .addColumn('tenant_id', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('bootstrapped', boolType, (c) => c.notNull().defaultTo(falseValue))
          .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('busy', boolType, (c) => c.notNull().defaultTo(falseValue))
          .addColumn('idle_since', 'bigint', (c) => c.notNull())
          .addColumn('recycled', 'text')
          .addColumn('recycled_at', 'bigint')
          .addCheckConstraint(
            'warm_pool_members_recycled_at',
            sql`(recycled is null) = (recycled_at is null)`,
          );
        for (const column of ['bootstrapped', 'busy']) {
          const check = boolCheck(column);
          if (check)
            members = members.addCheckConstraint(`warm_pool_members_${column}_bool`, check);
        }
        await members.execute();
        await db.schema
          .createIndex('warm_pool_members_pool_idx')
          .on('warm_pool_members')
          .columns(['pool_key', 'recycled'])
          .execute();
      },
    },
    '0011_attempt_exchange': {
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
    },
    '0012_attempt_revocation': {
      async up(db: Db): Promise<void> {
        // Revocation of any attempt that still verifies (issue 34): a try a retry or clear
        // superseded is no longer the task-instance row's, so its revocation is kept on its
        // record (the row's credential_revoked_try still carries the current try's).
        await db.schema
          .alterTable('attempt_records')
          .addColumn('credential_revoked_at', 'bigint')
          .execute();
      },
    },
    '0013_secret_grants': {
      async up(db: Db): Promise<void> {
        // Secret grants (issue 34): the DAG id patterns that may declare a Variable or a
        // Connection, as a JSON array of strings; null (every existing row) grants it to every
        // DAG of the tenant, as before.
        await db.schema.alterTable('variables').addColumn('dag_grants', 'text').execute();
        await db.schema.alterTable('connections').addColumn('dag_grants', 'text').execute();
      },
    },
    '0014_secret_masking': {
      async up(db: Db): Promise<void> {
        // Whether the attempt's agent masks delivered secrets in its output (issue 34): 1 when
        // its Register said so, 0 otherwise; the control plane masks on write for the rest.
        await db.schema
          .alterTable('attempt_records')
          .addColumn('agent_masks_secrets', 'integer')
          .execute();
      },
    },
    '0015_task_mapping': {
      async up(db: Db): Promise<void> {
        // Dynamic task mapping (issue 41): a task instance is (run, task, map index), Airflow's
        // key, with -1 for a task that is not mapped. Its tries, logs and XCom are keyed by the
        // map index too, and the attempt record names it. `map_value` holds one map index's
        // arguments (JSON: env name -> value), fixed when the task is expanded; `decision_json`
        // a finished branch or short-circuit task's decision ({followed, skipped}).
        if (dialect === 'postgres') {
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
            .addUniqueConstraint('task_instances_run_task_map_uq', [
              'dag_run_id',
              'task_id',
              'map_index',
            ])
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
        } else {
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
              .addUniqueConstraint('task_instances_run_task_map_uq', [
                'dag_run_id',
                'task_id',
                'map_index',
              ])
              .addForeignKeyConstraint('task_instances_tenant_fk', ['tenant_id'], 'tenants', [
                'id',
              ]);
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
              .addForeignKeyConstraint(
                'task_instance_history_tenant_fk',
                ['tenant_id'],
                'tenants',
                ['id'],
              )
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
        await db.schema
          .alterTable('attempt_records')
          .addColumn('map_index', 'integer', (c) => c.notNull().defaultTo(-1))
          .execute();
      },
    },
    '0016_replicas_and_lease_terms': {
      async up(db: Db): Promise<void> {
        // Pro's history for operators and fault tests (docs/pro.md, "Faults"). Created on
        // SQLite too, so both dialects keep one schema; Lite writes neither.
        //
        // scheduler_lease_terms: one row per epoch of a lease, kept by a trigger on
        // scheduler_lease, in the same transaction as the acquire, renew or release that
        // changed it: a term cannot be granted without its row, nor its row lag its grant.
        await db.schema
          .createTable('scheduler_lease_terms')
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('epoch', 'bigint', (c) => c.notNull())
          .addColumn('holder', 'text', (c) => c.notNull())
          .addColumn('granted_at', 'bigint', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('scheduler_lease_terms_pk', ['name', 'epoch'])
          .execute();
        // Each replica's advertised agent URLs, to warn when replicas disagree.
        await db.schema
          .createTable('control_plane_replicas')
          .addColumn('instance', 'text', (c) => c.primaryKey())
          .addColumn('role', 'text', (c) => c.notNull())
          .addColumn('agent_urls', 'text', (c) => c.notNull())
          .addColumn('started_at', 'bigint', (c) => c.notNull())
          .addColumn('seen_at', 'bigint', (c) => c.notNull())
          .execute();
        if (dialect !== 'postgres') return;
        // granted_at is read when the row changes, after the acquire's WHERE saw the previous
        // term expired: a new term never starts before the last one's recorded expiry. The
        // function resolves names in the schema it was created in (search_path FROM CURRENT),
        // whatever the session's search_path.
        await sql`
          create function scheduler_lease_record_term() returns trigger
          language plpgsql set search_path from current as $$
          declare
            granted bigint := (extract(epoch from clock_timestamp()) * 1000)::bigint;
          begin
            if tg_op = 'INSERT' or new.epoch <> old.epoch then
              -- A holder re-acquiring its own live lease ends its old term here: every fenced
              -- write names its epoch, so the old one's writes are refused from this moment.
              if tg_op = 'UPDATE' then
                update scheduler_lease_terms set expires_at = least(expires_at, granted)
                 where name = old.name and epoch = old.epoch;
              end if;
              insert into scheduler_lease_terms (name, epoch, holder, granted_at, expires_at)
              values (new.name, new.epoch, new.holder, granted, new.expires_at);
            else
              update scheduler_lease_terms set expires_at = new.expires_at
               where name = new.name and epoch = new.epoch;
            end if;
            return new;
          end $$`.execute(db);
        await sql`
          create trigger scheduler_lease_terms_trigger after insert or update on scheduler_lease
          for each row execute function scheduler_lease_record_term()`.execute(db);
      },
    },
  };
}

/**
 * Rebuilds a SQLite table under a new definition: `create` makes it under a scratch name, every
 * row is copied by the columns both have (new columns take their defaults), the old table is
 * dropped and the new one renamed into place. Indexes are the caller's to recreate.
 */
async function rebuildSqlite(
  db: Db,
  table: string,
  create: (name: string) => Promise<unknown>,
): Promise<void> {
  const scratch = `${table}__rebuild`;
  await create(scratch);
  const cols = (name: string) =>
    sql<{ name: string }>`select name from pragma_table_info(${name})`.execute(db);
  const before = new Set((await cols(table)).rows.map((r) => r.name));
  const shared = (await cols(scratch)).rows.map((r) => r.name).filter((n) => before.has(n));
  const list = sql.join(shared.map((n) => sql.ref(n)));
  await sql`insert into ${sql.table(scratch)} (${list}) select ${list} from ${sql.table(table)}`.execute(
    db,
  );
  await sql`drop table ${sql.table(table)}`.execute(db);
  await sql`alter table ${sql.table(scratch)} rename to ${sql.table(table)}`.execute(db);
}

export function migrationProvider(dialect: StoreDialect): MigrationProvider {
  return { getMigrations: () => Promise.resolve(migrations(dialect)) };
}
