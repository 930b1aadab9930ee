import { randomUUID } from 'node:crypto';
import { StoreError, type DagRunState, type DagSpec, type TaskInstanceState } from '@leoflow/core';
import { Migrator, sql } from 'kysely';
import type { Insertable, Kysely, Selectable, Updateable } from 'kysely';
import type {
  ApiTokensTable,
  ConnectionsTable,
  Database,
  DagRunsTable,
  DagsTable,
  DbBool,
  TaskInstanceHistoryTable,
  TaskInstancesTable,
  TaskLogsTable,
  VariablesTable,
  XComTable,
} from './db-types.js';
import { migrationProvider, type StoreDialect } from './migrations.js';
import type { SqliteHotReads } from './sqlite-hot-reads.js';
import type {
  AttemptFence,
  HeartbeatOutcome,
  HeartbeatRenewal,
  NewRun,
  RunSpecRef,
  Store,
  TaskInstanceExpectation,
  TaskInstancePatch,
} from './store.js';
import type {
  ApiTokenRow,
  AttemptRecordKey,
  AttemptRecordRow,
  AttemptSessionBinding,
  UndeclaredReads,
  UndeclaredUseSummary,
  DagRow,
  DagRunRow,
  DagVersionRow,
  LogLineRow,
  LogStreamName,
  Page,
  RunType,
  TaskInstanceHistoryRow,
  TaskInstanceRow,
  TenantRow,
  XComRow,
} from './types.js';
import type {
  AuditRecord,
  ConnectionRecord,
  NewAuditRecord,
  SealedKind,
  SealedRef,
  VariableRecord,
} from './vault-types.js';

export const MIGRATION_TABLE = 'leoflow_migration';
export const MIGRATION_LOCK_TABLE = 'leoflow_migration_lock';

// Well under SQLite's 32766 bound-parameter limit for the widest table (19 columns).
const INSERT_CHUNK = 500;
// Names per `in (...)` list: far below both dialects' bound-parameter limits.
const IN_CHUNK = 500;

const PATCHABLE_KEYS = [
  'state',
  'queued_at',
  'started_at',
  'ended_at',
  'last_heartbeat_at',
  'retry_at',
  'exit_code',
  'error_message',
  'hostname',
  'pid',
  'terminate_requested',
  'max_tries',
  'dispatch_gen',
] as const satisfies readonly (keyof TaskInstancePatch)[];

export interface KyselyStoreOptions {
  dialect: StoreDialect;
  /** PostgreSQL: the schema that holds the tables (and the migration bookkeeping). */
  schema?: string;
  /**
   * SQLite on a file: a second, read-only connection for the agent secret path's reads
   * (sqlite-hot-reads.ts). The store owns it from here on and closes it.
   */
  hotReads?: SqliteHotReads;
}

type Tx = Kysely<Database>;

/**
 * The single Store implementation. Every method reads and writes through Kysely; the few
 * dialect differences (boolean encoding, row locks, how a write transaction starts) are
 * confined to small helpers below.
 */
export class KyselyStore implements Store {
  readonly dialect: StoreDialect;
  readonly #db: Kysely<Database>;
  readonly #schema: string | undefined;
  readonly #hot: SqliteHotReads | undefined;
  #closed = false;

  constructor(db: Kysely<Database>, opts: KyselyStoreOptions) {
    this.#db = db;
    this.dialect = opts.dialect;
    this.#schema = opts.schema;
    this.#hot = opts.hotReads;
  }

  /** Escape hatch for tests and tooling; production code goes through the Store methods. */
  get kysely(): Kysely<Database> {
    return this.#db;
  }

  #migrator(): Migrator {
    return new Migrator({
      db: this.#db,
      provider: migrationProvider(this.dialect),
      migrationTableName: MIGRATION_TABLE,
      migrationLockTableName: MIGRATION_LOCK_TABLE,
      // Without an explicit schema Kysely's "does the table exist" probe matches the table in
      // any schema, so a second schema in the same database would skip creating its own.
      ...(this.#schema !== undefined ? { migrationTableSchema: this.#schema } : {}),
    });
  }

  async migrate(): Promise<void> {
    const { error, results } = await this.#migrator().migrateToLatest();
    if (error !== undefined) {
      const failed = results?.find((r) => r.status === 'Error')?.migrationName;
      const cause = error instanceof Error ? error.message : JSON.stringify(error);
      const refused = new StoreError(
        'LF_STORE_MIGRATION_FAILED',
        `store migration ${failed ?? '(setup)'} failed on ${this.dialect}: ${cause}`,
        { dialect: this.dialect, migration: failed ?? null },
      );
      throw Object.assign(refused, { cause: error });
    }
  }

  async migrationStatus(): Promise<{ applied: string[]; pending: string[] }> {
    // Same bookkeeping tables (and schema) as migrate(); getMigrations() only reads them and
    // reports everything pending when they do not exist yet.
    const all = await this.#migrator().getMigrations();
    return {
      applied: all.filter((m) => m.executedAt !== undefined).map((m) => m.name),
      pending: all.filter((m) => m.executedAt === undefined).map((m) => m.name),
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // The reader first: the last connection to close is the one that checkpoints the WAL and
    // removes it, and a read-only connection cannot.
    this.#hot?.close();
    // Kysely owns the driver: this closes the SQLite handle (checkpointing the WAL) or ends
    // the pg pool.
    await this.#db.destroy();
  }

  // ---------------------------------------------------------------- tenants

  async ensureTenant(tenant_id: string, name: string, now: number): Promise<void> {
    await this.#db
      .insertInto('tenants')
      .values({ id: tenant_id, name, created_at: now })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  }

  async createTenant(tenant: TenantRow): Promise<boolean> {
    const res = await this.#db
      .insertInto('tenants')
      .values({ id: tenant.id, name: tenant.name, created_at: tenant.created_at })
      .onConflict((oc) => oc.column('id').doNothing())
      .executeTakeFirst();
    return Number(res.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async getTenant(tenant_id: string): Promise<TenantRow | undefined> {
    const row = await this.#db
      .selectFrom('tenants')
      .selectAll()
      .where('id', '=', tenant_id)
      .executeTakeFirst();
    return row ? { id: row.id, name: row.name, created_at: num(row.created_at) } : undefined;
  }

  async listTenants(page: Page): Promise<TenantRow[]> {
    const rows = await this.#db
      .selectFrom('tenants')
      .selectAll()
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map((r) => ({ id: r.id, name: r.name, created_at: num(r.created_at) }));
  }

  // ---------------------------------------------------------------- api tokens

  async insertApiToken(row: ApiTokenRow): Promise<void> {
    await this.#db.insertInto('api_tokens').values(row).execute();
  }

  async getApiToken(jti: string): Promise<ApiTokenRow | undefined> {
    const row = await this.#db
      .selectFrom('api_tokens')
      .selectAll()
      .where('jti', '=', jti)
      .executeTakeFirst();
    return row ? apiTokenRow(row) : undefined;
  }

  async listApiTokens(
    tenant_id: string,
    filter: { include_revoked?: boolean; name?: string },
    page: Page,
  ): Promise<ApiTokenRow[]> {
    let q = this.#db.selectFrom('api_tokens').selectAll().where('tenant_id', '=', tenant_id);
    if (!filter.include_revoked) q = q.where('revoked_at', 'is', null);
    if (filter.name !== undefined) q = q.where('name', '=', filter.name);
    const rows = await q
      .orderBy('created_at', 'desc')
      .orderBy('jti')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(apiTokenRow);
  }

  async revokeApiToken(tenant_id: string, jti: string, by: string, now: number): Promise<boolean> {
    const res = await this.#db
      .updateTable('api_tokens')
      .set({ revoked_at: now, revoked_by: by })
      .where('tenant_id', '=', tenant_id)
      .where('jti', '=', jti)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  // ---------------------------------------------------------------- dags

  async putDagVersion(
    tenant_id: string,
    spec: DagSpec,
    spec_hash: string,
    now: number,
  ): Promise<{ version: number; created: boolean }> {
    try {
      return await this.#putDagVersionOnce(tenant_id, spec, spec_hash, now);
    } catch (err) {
      // The row lock below already serialises pushes of one DAG; the primary key is the
      // last line of defence, and a push that loses to it simply re-reads and tries again.
      if (!isUniqueViolation(err)) throw err;
      return await this.#putDagVersionOnce(tenant_id, spec, spec_hash, now);
    }
  }

  async #putDagVersionOnce(
    tenant_id: string,
    spec: DagSpec,
    spec_hash: string,
    now: number,
  ): Promise<{ version: number; created: boolean }> {
    const dag_id = spec.dag_id;
    return this.#writeTx(async (tx) => {
      // Every push first makes sure the dags row exists and then locks it, so concurrent
      // pushes of one DAG (including the very first ones, when there is no row to lock yet)
      // run one after another and always lock dags before dag_versions. A placeholder with
      // current_version 0 is only ever visible inside this transaction.
      await tx
        .insertInto('dags')
        .values({
          tenant_id,
          dag_id,
          current_version: 0,
          is_paused: this.#bool(false),
          last_scheduled_logical_date: null,
          created_at: now,
          updated_at: now,
        })
        .onConflict((oc) => oc.columns(['tenant_id', 'dag_id']).doNothing())
        .execute();
      let dagQuery = tx
        .selectFrom('dags')
        .select(['current_version'])
        .where('tenant_id', '=', tenant_id)
        .where('dag_id', '=', dag_id);
      if (this.dialect === 'postgres') dagQuery = dagQuery.forUpdate();
      const dag = await dagQuery.executeTakeFirstOrThrow();

      if (dag.current_version > 0) {
        const current = await tx
          .selectFrom('dag_versions')
          .select(['spec_hash'])
          .where('tenant_id', '=', tenant_id)
          .where('dag_id', '=', dag_id)
          .where('version', '=', dag.current_version)
          .executeTakeFirst();
        if (current?.spec_hash === spec_hash) {
          return { version: dag.current_version, created: false };
        }
      }

      const max = await tx
        .selectFrom('dag_versions')
        .select((eb) => eb.fn.max<number | null>('version').as('max_version'))
        .where('tenant_id', '=', tenant_id)
        .where('dag_id', '=', dag_id)
        .executeTakeFirst();
      const version = Number(max?.max_version ?? 0) + 1;

      await tx
        .insertInto('dag_versions')
        .values({
          tenant_id,
          dag_id,
          version,
          spec_json: JSON.stringify(spec),
          spec_hash,
          created_at: now,
        })
        .execute();
      await tx
        .updateTable('dags')
        .set({ current_version: version, updated_at: now })
        .where('tenant_id', '=', tenant_id)
        .where('dag_id', '=', dag_id)
        .execute();
      return { version, created: true };
    });
  }

  async getDag(tenant_id: string, dag_id: string): Promise<DagRow | undefined> {
    const row = await this.#db
      .selectFrom('dags')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .executeTakeFirst();
    return row && toDagRow(row);
  }

  async listDags(tenant_id: string, page: Page): Promise<DagRow[]> {
    const rows = await this.#db
      .selectFrom('dags')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('dag_id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(toDagRow);
  }

  async listSchedulableDags(): Promise<DagRow[]> {
    const rows = await this.#db
      .selectFrom('dags')
      .selectAll()
      .where('is_paused', '=', this.#bool(false))
      .orderBy('tenant_id')
      .orderBy('dag_id')
      .execute();
    return rows.map(toDagRow);
  }

  async getDagVersion(
    tenant_id: string,
    dag_id: string,
    version: number,
  ): Promise<DagVersionRow | undefined> {
    const row = await this.#db
      .selectFrom('dag_versions')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('version', '=', version)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    return {
      tenant_id: row.tenant_id,
      dag_id: row.dag_id,
      version: row.version,
      spec: JSON.parse(row.spec_json) as DagSpec,
      spec_hash: row.spec_hash,
      created_at: num(row.created_at),
    };
  }

  async listDagVersions(tenant_id: string, dag_id: string): Promise<Omit<DagVersionRow, 'spec'>[]> {
    const rows = await this.#db
      .selectFrom('dag_versions')
      .select(['tenant_id', 'dag_id', 'version', 'spec_hash', 'created_at'])
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .orderBy('version')
      .execute();
    return rows.map((r) => ({ ...r, created_at: num(r.created_at) }));
  }

  async setDagPaused(
    tenant_id: string,
    dag_id: string,
    paused: boolean,
    now: number,
  ): Promise<boolean> {
    const res = await this.#db
      .updateTable('dags')
      .set({ is_paused: this.#bool(paused), updated_at: now })
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  // ---------------------------------------------------------------- runs

  async createRun(run: NewRun): Promise<DagRunRow | undefined> {
    const id = randomUUID();
    const row: Insertable<DagRunsTable> = {
      id,
      tenant_id: run.tenant_id,
      dag_id: run.dag_id,
      run_id: run.run_id,
      dag_version: run.dag_version,
      run_type: run.run_type,
      state: 'queued',
      logical_date: run.logical_date,
      data_interval_start: run.data_interval_start,
      data_interval_end: run.data_interval_end,
      conf_json: JSON.stringify(run.conf),
      created_at: run.now,
      started_at: null,
      ended_at: null,
    };
    try {
      const created = await this.#writeTx(async (tx) => {
        const existing = await tx
          .selectFrom('dag_runs')
          .select('id')
          .where('tenant_id', '=', run.tenant_id)
          .where('dag_id', '=', run.dag_id)
          .where('run_id', '=', run.run_id)
          .executeTakeFirst();
        if (existing !== undefined) return false;

        await tx.insertInto('dag_runs').values(row).execute();
        const tis = run.tasks.map((t) =>
          this.#newTaskInstance(run.tenant_id, run.dag_id, id, t, run.now),
        );
        for (const chunk of chunks(tis, INSERT_CHUNK)) {
          await tx.insertInto('task_instances').values(chunk).execute();
        }

        if (run.run_type === 'scheduled' && run.logical_date !== null) {
          const ld = run.logical_date;
          // Backfills and catch-up may create runs out of order; the planner's cursor only
          // moves forward.
          await tx
            .updateTable('dags')
            .set((eb) => ({
              last_scheduled_logical_date: eb
                .case()
                .when(
                  eb.or([
                    eb('last_scheduled_logical_date', 'is', null),
                    eb('last_scheduled_logical_date', '<', ld),
                  ]),
                )
                .then(ld)
                .else(eb.ref('last_scheduled_logical_date'))
                .end(),
            }))
            .where('tenant_id', '=', run.tenant_id)
            .where('dag_id', '=', run.dag_id)
            .execute();
        }
        return true;
      });
      return created ? toRunRow(row as Selectable<DagRunsTable>) : undefined;
    } catch (err) {
      // A concurrent creator won between our pre-check and insert. Only that case is
      // idempotent: a duplicate task_id in run.tasks must still surface as an error.
      if (isUniqueViolation(err)) {
        const winner = await this.getRun(run.tenant_id, run.dag_id, run.run_id);
        if (winner !== undefined) return undefined;
      }
      throw err;
    }
  }

  async getRunById(id: string): Promise<DagRunRow | undefined> {
    const row = await this.#db
      .selectFrom('dag_runs')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toRunRow(row);
  }

  async getRunSpecRef(id: string): Promise<RunSpecRef | undefined> {
    if (this.#hot !== undefined) return this.#hot.runSpecRef(id);
    const row = await this.#db
      .selectFrom('dag_runs')
      .select(['tenant_id', 'dag_id', 'dag_version'])
      .where('id', '=', id)
      .executeTakeFirst();
    return row && { tenant_id: row.tenant_id, dag_id: row.dag_id, dag_version: row.dag_version };
  }

  async getRun(tenant_id: string, dag_id: string, run_id: string): Promise<DagRunRow | undefined> {
    const row = await this.#db
      .selectFrom('dag_runs')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('run_id', '=', run_id)
      .executeTakeFirst();
    return row && toRunRow(row);
  }

  async listRuns(
    tenant_id: string,
    filter: { dag_id?: string; state?: DagRunState; run_id?: string },
    page: Page,
  ): Promise<DagRunRow[]> {
    let q = this.#db.selectFrom('dag_runs').selectAll().where('tenant_id', '=', tenant_id);
    if (filter.dag_id !== undefined) q = q.where('dag_id', '=', filter.dag_id);
    if (filter.state !== undefined) q = q.where('state', '=', filter.state);
    if (filter.run_id !== undefined) q = q.where('run_id', '=', filter.run_id);
    const rows = await q
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(toRunRow);
  }

  async listRunsInStates(states: readonly DagRunState[]): Promise<DagRunRow[]> {
    if (states.length === 0) return [];
    const rows = await this.#db
      .selectFrom('dag_runs')
      .selectAll()
      .where('state', 'in', states)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toRunRow);
  }

  async countRunsInStates(
    tenant_id: string,
    dag_id: string,
    states: readonly DagRunState[],
  ): Promise<number> {
    if (states.length === 0) return 0;
    const row = await this.#db
      .selectFrom('dag_runs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('state', 'in', states)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async setRunState(
    id: string,
    from: readonly DagRunState[],
    to: DagRunState,
    times: { started_at?: number | null; ended_at?: number | null },
  ): Promise<boolean> {
    if (from.length === 0) return false;
    const set: Updateable<DagRunsTable> = { state: to };
    if (times.started_at !== undefined) set.started_at = times.started_at;
    if (times.ended_at !== undefined) set.ended_at = times.ended_at;
    const res = await this.#db
      .updateTable('dag_runs')
      .set(set)
      .where('id', '=', id)
      .where('state', 'in', from)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async setRunVersion(id: string, dag_version: number): Promise<void> {
    await this.#db.updateTable('dag_runs').set({ dag_version }).where('id', '=', id).execute();
  }

  // ---------------------------------------------------------------- task instances

  async listTaskInstances(dag_run_id: string): Promise<TaskInstanceRow[]> {
    const rows = await this.#db
      .selectFrom('task_instances')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id)
      .orderBy('task_id')
      .execute();
    return rows.map(toTaskInstanceRow);
  }

  async listTaskInstancesOfRuns(dag_run_ids: readonly string[]): Promise<TaskInstanceRow[]> {
    if (dag_run_ids.length === 0) return [];
    const rows = await this.#db
      .selectFrom('task_instances')
      .selectAll()
      .where('dag_run_id', 'in', [...dag_run_ids])
      .orderBy('task_id')
      .execute();
    return rows.map(toTaskInstanceRow);
  }

  async ensureTaskInstances(
    dag_run_id: string,
    tasks: { task_id: string; max_tries: number }[],
    now: number,
  ): Promise<string[]> {
    return this.#writeTx(async (tx) => {
      const run = await tx
        .selectFrom('dag_runs')
        .select(['tenant_id', 'dag_id'])
        .where('id', '=', dag_run_id)
        .executeTakeFirst();
      if (run === undefined) throw new Error(`dag run ${dag_run_id} does not exist`);
      const created: string[] = [];
      const rows = tasks.map((t) =>
        this.#newTaskInstance(run.tenant_id, run.dag_id, dag_run_id, t, now),
      );
      for (const chunk of chunks(rows, INSERT_CHUNK)) {
        const inserted = await tx
          .insertInto('task_instances')
          .values(chunk)
          .onConflict((oc) => oc.columns(['dag_run_id', 'task_id']).doNothing())
          .returning('task_id')
          .execute();
        created.push(...inserted.map((r) => r.task_id));
      }
      return created;
    });
  }

  async getTaskInstance(dag_run_id: string, task_id: string): Promise<TaskInstanceRow | undefined> {
    const row = await this.#db
      .selectFrom('task_instances')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .executeTakeFirst();
    return row && toTaskInstanceRow(row);
  }

  async getTaskInstanceById(id: string): Promise<TaskInstanceRow | undefined> {
    const row = await this.#db
      .selectFrom('task_instances')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toTaskInstanceRow(row);
  }

  async getAttemptFence(id: string): Promise<AttemptFence | undefined> {
    if (this.#hot !== undefined) return this.#hot.attemptFence(id);
    const row = await this.#db
      .selectFrom('task_instances')
      .select([
        'tenant_id',
        'dag_run_id',
        'task_id',
        'try_number',
        'dispatch_gen',
        'state',
        'ended_at',
      ])
      .where('id', '=', id)
      .executeTakeFirst();
    return (
      row && {
        tenant_id: row.tenant_id,
        dag_run_id: row.dag_run_id,
        task_id: row.task_id,
        try_number: row.try_number,
        dispatch_gen: Number(row.dispatch_gen),
        state: row.state as TaskInstanceState,
        ended_at: numOrNull(row.ended_at),
      }
    );
  }

  async listTaskInstancesInStates(
    states: readonly TaskInstanceState[],
    limit: number,
  ): Promise<TaskInstanceRow[]> {
    if (states.length === 0 || limit <= 0) return [];
    const rows = await this.#db
      .selectFrom('task_instances')
      .selectAll()
      .where('state', 'in', states)
      // Longest-waiting first, so a busy tenant cannot starve rows that changed earlier.
      .orderBy('updated_at')
      .orderBy('id')
      .limit(limit)
      .execute();
    return rows.map(toTaskInstanceRow);
  }

  async countTaskInstancesInStates(
    tenant_id: string,
    dag_id: string,
    states: readonly TaskInstanceState[],
  ): Promise<number> {
    if (states.length === 0) return 0;
    const row = await this.#db
      .selectFrom('task_instances')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('state', 'in', states)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async updateTaskInstance(
    id: string,
    expect: TaskInstanceExpectation,
    patch: TaskInstancePatch,
    now: number,
  ): Promise<boolean> {
    if (expect.states.length === 0) return false;
    let q = this.#db
      .updateTable('task_instances')
      .set({ ...this.#patchColumns(patch), updated_at: now })
      .where('id', '=', id)
      .where('state', 'in', expect.states);
    if (expect.try_number !== undefined) q = q.where('try_number', '=', expect.try_number);
    if (expect.dispatch_gen !== undefined) q = q.where('dispatch_gen', '=', expect.dispatch_gen);
    const res = await q.executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async archiveAndBumpTry(
    id: string,
    expect: TaskInstanceExpectation,
    archived_state: TaskInstanceState,
    patch: TaskInstancePatch,
    now: number,
  ): Promise<boolean> {
    if (expect.states.length === 0) return false;
    return this.#writeTx(async (tx) => {
      // The pre-image is what goes to history. On PostgreSQL the row lock makes a concurrent
      // caller wait here and then re-read the bumped row, so its guarded UPDATE below misses.
      let pre = tx.selectFrom('task_instances').selectAll().where('id', '=', id);
      if (this.dialect === 'postgres') pre = pre.forUpdate();
      const before = await pre.executeTakeFirst();
      if (before === undefined) return false;

      let q = tx
        .updateTable('task_instances')
        .set((eb) => ({
          ...this.#patchColumns(patch),
          try_number: eb('try_number', '+', 1),
          // the archived try's renewals move to its attempt record below
          renewal_count: 0,
          renewed_at: null,
          renewed_credential_exp: null,
          updated_at: now,
        }))
        .where('id', '=', id)
        .where('state', 'in', expect.states)
        // Pins the update to the exact attempt we are about to archive.
        .where('try_number', '=', before.try_number);
      if (expect.try_number !== undefined) q = q.where('try_number', '=', expect.try_number);
      if (expect.dispatch_gen !== undefined) q = q.where('dispatch_gen', '=', expect.dispatch_gen);
      const res = await q.executeTakeFirst();
      if (!changed(res.numUpdatedRows)) return false;

      const pending = num(before.renewal_count ?? 0);
      if (pending > 0) {
        await tx
          .updateTable('attempt_records')
          .set((eb) => ({
            renewals: eb('renewals', '+', pending),
            last_renewed_at: before.renewed_at,
            credential_exp: before.renewed_credential_exp,
            updated_at: sql`case when updated_at > ${before.renewed_at} then updated_at else ${before.renewed_at} end`,
          }))
          .where('task_instance_id', '=', id)
          .where('try_number', '=', before.try_number)
          .execute();
      }

      const history: Insertable<TaskInstanceHistoryTable> = {
        id: randomUUID(),
        tenant_id: before.tenant_id,
        dag_run_id: before.dag_run_id,
        task_id: before.task_id,
        try_number: before.try_number,
        state: archived_state,
        started_at: before.started_at,
        ended_at: before.ended_at,
        exit_code: before.exit_code,
        error_message: before.error_message,
        archived_at: now,
      };
      await tx.insertInto('task_instance_history').values(history).execute();
      return true;
    });
  }

  async listTaskInstanceHistory(
    dag_run_id: string,
    task_id?: string,
  ): Promise<TaskInstanceHistoryRow[]> {
    let q = this.#db
      .selectFrom('task_instance_history')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id);
    if (task_id !== undefined) q = q.where('task_id', '=', task_id);
    const rows = await q.orderBy('task_id').orderBy('try_number').execute();
    return rows.map(toHistoryRow);
  }

  async recordHeartbeat(
    id: string,
    try_number: number,
    now: number,
    dispatch_gen?: number,
    renewal?: HeartbeatRenewal,
  ): Promise<HeartbeatOutcome> {
    // updated_at is left alone: it orders the scheduler's work queue, and a heartbeat is not
    // a state change.
    let q = this.#db.updateTable('task_instances').set({ last_heartbeat_at: now });
    if (renewal !== undefined) {
      // The renewal counts only where the caller will hand the token out: neither a requested
      // termination nor this try's revoked credential is renewed. It is kept on this row (one
      // statement, one page), and read into the attempt record (see #withPendingRenewals).
      const renews = sql<boolean>`(terminate_requested = ${this.#bool(false)} and (credential_revoked_try is null or credential_revoked_try <> ${try_number}))`;
      q = q.set({
        renewal_count: sql`renewal_count + case when ${renews} then 1 else 0 end`,
        renewed_at: sql`case when ${renews} then ${now} else renewed_at end`,
        renewed_credential_exp: sql`case when ${renews} then ${renewal.credential_exp} else renewed_credential_exp end`,
      });
    }
    q = q
      .where('id', '=', id)
      .where('try_number', '=', try_number)
      .where('state', 'in', ['queued', 'running']);
    if (dispatch_gen !== undefined) q = q.where('dispatch_gen', '=', dispatch_gen);
    const row = await q
      .returning(['terminate_requested', 'credential_revoked_try'])
      .executeTakeFirst();
    if (row === undefined) return { kind: 'stale' };
    return {
      kind: 'live',
      terminate_requested: fromBool(row.terminate_requested),
      credential_revoked: row.credential_revoked_try === try_number,
    };
  }

  // ---------------------------------------------------------------- attempt records

  async ensureAttemptRecord(
    key: AttemptRecordKey,
    now: number,
    credential_exp: number,
  ): Promise<void> {
    await this.#db
      .insertInto('attempt_records')
      .values({ ...key, credential_exp, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['task_instance_id', 'try_number']).doNothing())
      .execute();
  }

  async bindAttemptSession(
    task_instance_id: string,
    try_number: number,
    session_hash: string,
    now: number,
  ): Promise<AttemptSessionBinding> {
    const res = await this.#db
      .updateTable('attempt_records')
      .set({ session_hash, registered_at: now, updated_at: now })
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .where('session_hash', 'is', null)
      .executeTakeFirst();
    if (changed(res.numUpdatedRows)) return 'bound';
    const row = await this.#db
      .selectFrom('attempt_records')
      .select('session_hash')
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .executeTakeFirst();
    return row?.session_hash === session_hash ? 'same' : 'conflict';
  }

  async getAttemptRecord(
    task_instance_id: string,
    try_number: number,
  ): Promise<AttemptRecordRow | undefined> {
    const row = await this.#withPendingRenewals()
      .where('attempt_records.task_instance_id', '=', task_instance_id)
      .where('attempt_records.try_number', '=', try_number)
      .executeTakeFirst();
    return row ? attemptRecordRow(row) : undefined;
  }

  async listAttemptRecords(dag_run_id: string, task_id?: string): Promise<AttemptRecordRow[]> {
    let q = this.#withPendingRenewals().where('attempt_records.dag_run_id', '=', dag_run_id);
    if (task_id !== undefined) q = q.where('attempt_records.task_id', '=', task_id);
    const rows = await q
      .orderBy('attempt_records.task_id')
      .orderBy('attempt_records.try_number')
      .execute();
    return rows.map(attemptRecordRow);
  }

  /**
   * Attempt records with the renewals their try's task-instance row holds (only while that try
   * is the row's current one; a try bump folds them into the record).
   */
  #withPendingRenewals() {
    return this.#db
      .selectFrom('attempt_records')
      .leftJoin('task_instances as ti', (j) =>
        j
          .onRef('ti.id', '=', 'attempt_records.task_instance_id')
          .onRef('ti.try_number', '=', 'attempt_records.try_number'),
      )
      .selectAll('attempt_records')
      .select([
        'ti.renewal_count as pending_renewals',
        'ti.renewed_at as pending_renewed_at',
        'ti.renewed_credential_exp as pending_credential_exp',
      ]);
  }

  async noteAttemptDelivery(
    task_instance_id: string,
    try_number: number,
    kind: 'variables' | 'connections',
    outcome: { names: string[] } | { refusal: string },
    modes: { scoping: string; liveness: string },
    now: number,
  ): Promise<void> {
    const base = { scoping_mode: modes.scoping, liveness_mode: modes.liveness, updated_at: now };
    const patch =
      'names' in outcome
        ? kind === 'variables'
          ? { ...base, variables_delivered: JSON.stringify([...outcome.names].sort()) }
          : { ...base, connections_delivered: JSON.stringify([...outcome.names].sort()) }
        : kind === 'variables'
          ? { ...base, variables_refusal: outcome.refusal }
          : { ...base, connections_refusal: outcome.refusal };
    await this.#db
      .updateTable('attempt_records')
      .set(patch)
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .execute();
  }

  async noteAttemptRenewal(
    task_instance_id: string,
    try_number: number,
    outcome: { exp: number } | { stopped: string },
    now: number,
  ): Promise<void> {
    const q = this.#db
      .updateTable('attempt_records')
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number);
    if ('exp' in outcome) {
      await q
        .set((eb) => ({
          renewals: eb('renewals', '+', 1),
          last_renewed_at: now,
          credential_exp: outcome.exp,
          updated_at: now,
        }))
        .execute();
    } else {
      // The first stop reason is kept (a ceiling stop followed by beats is still "ceiling").
      await q
        .set({ renewal_stopped: outcome.stopped, updated_at: now })
        .where('renewal_stopped', 'is', null)
        .execute();
    }
  }

  async noteUndeclaredReads(
    task_instance_id: string,
    try_number: number,
    reads: UndeclaredReads,
    now: number,
  ): Promise<boolean> {
    const res = await this.#db
      .updateTable('attempt_records')
      .set({ undeclared_reads: JSON.stringify(reads), updated_at: now })
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .where('undeclared_reads', 'is', null)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async summarizeUndeclaredUse(
    tenant_id: string,
    dag_id?: string,
  ): Promise<UndeclaredUseSummary[]> {
    let q = this.#db
      .selectFrom('attempt_records')
      .select(['dag_id', 'undeclared_reads', 'updated_at'])
      .where('tenant_id', '=', tenant_id)
      .where('undeclared_reads', 'is not', null);
    if (dag_id !== undefined) q = q.where('dag_id', '=', dag_id);
    const rows = await q.execute();
    const by = new Map<string, { v: Set<string>; c: Set<string>; n: number; last: number }>();
    for (const r of rows) {
      const reads = JSON.parse(r.undeclared_reads ?? '{}') as Partial<UndeclaredReads>;
      let e = by.get(r.dag_id);
      if (!e) by.set(r.dag_id, (e = { v: new Set(), c: new Set(), n: 0, last: 0 }));
      for (const n of reads.variables ?? []) e.v.add(n);
      for (const n of reads.connections ?? []) e.c.add(n);
      e.n++;
      e.last = Math.max(e.last, num(r.updated_at));
    }
    return [...by.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([dag, e]) => ({
        dag_id: dag,
        variables: [...e.v].sort(),
        connections: [...e.c].sort(),
        attempts: e.n,
        last_seen: e.last,
      }));
  }

  // ---------------------------------------------------------------- xcom

  async putXCom(row: XComRow): Promise<void> {
    await this.#upsertXCom(this.#db, row);
  }

  async putXComIfLive(
    row: XComRow,
    task_instance_id: string,
    try_number: number,
  ): Promise<boolean> {
    return this.#writeTx(async (tx) => {
      // The fence and the write in one transaction: on PostgreSQL the row lock makes a
      // concurrent retry/clear of this task instance wait (or this push see its result).
      let q = tx
        .selectFrom('task_instances')
        .select(['try_number', 'state'])
        .where('id', '=', task_instance_id);
      if (this.dialect === 'postgres') q = q.forUpdate();
      const ti = await q.executeTakeFirst();
      if (ti?.try_number !== try_number || (ti.state !== 'queued' && ti.state !== 'running')) {
        return false;
      }
      await this.#upsertXCom(tx, row);
      return true;
    });
  }

  async #upsertXCom(db: Kysely<Database>, row: XComRow): Promise<void> {
    const value = toBuffer(row.value);
    await db
      .insertInto('xcom')
      .values({
        tenant_id: row.tenant_id,
        dag_run_id: row.dag_run_id,
        task_id: row.task_id,
        key: row.key,
        value,
        content_type: row.content_type,
        created_at: row.created_at,
      })
      .onConflict((oc) =>
        oc.columns(['dag_run_id', 'task_id', 'key']).doUpdateSet((eb) => ({
          value: eb.ref('excluded.value'),
          content_type: eb.ref('excluded.content_type'),
          created_at: eb.ref('excluded.created_at'),
        })),
      )
      .execute();
  }

  async getXCom(dag_run_id: string, task_id: string, key: string): Promise<XComRow | undefined> {
    const row = await this.#db
      .selectFrom('xcom')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('key', '=', key)
      .executeTakeFirst();
    return row && toXComRow(row);
  }

  async listXComs(dag_run_id: string, task_id?: string): Promise<XComRow[]> {
    let q = this.#db.selectFrom('xcom').selectAll().where('dag_run_id', '=', dag_run_id);
    if (task_id !== undefined) q = q.where('task_id', '=', task_id);
    const rows = await q.orderBy('task_id').orderBy('key').execute();
    return rows.map(toXComRow);
  }

  // ---------------------------------------------------------------- logs

  async appendLogs(lines: LogLineRow[]): Promise<void> {
    if (lines.length === 0) return;
    const rows: Insertable<TaskLogsTable>[] = lines.map((l) => ({
      tenant_id: l.tenant_id,
      dag_run_id: l.dag_run_id,
      task_id: l.task_id,
      try_number: l.try_number,
      line_number: l.line_number,
      time: l.time,
      stream: l.stream,
      message: l.message,
    }));
    const insertChunk = (db: Tx, chunk: Insertable<TaskLogsTable>[]) =>
      db
        .insertInto('task_logs')
        .values(chunk)
        .onConflict((oc) =>
          oc.columns(['dag_run_id', 'task_id', 'try_number', 'line_number']).doNothing(),
        )
        .execute();
    const parts = chunks(rows, INSERT_CHUNK);
    if (parts.length === 1) {
      await insertChunk(this.#db, rows);
      return;
    }
    await this.#writeTx(async (tx) => {
      for (const part of parts) await insertChunk(tx, part);
    });
  }

  async readLogs(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    after_line: number,
    limit: number,
  ): Promise<LogLineRow[]> {
    if (limit <= 0) return [];
    const rows = await this.#db
      .selectFrom('task_logs')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('try_number', '=', try_number)
      .where('line_number', '>', after_line)
      .orderBy('line_number')
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      tenant_id: r.tenant_id,
      dag_run_id: r.dag_run_id,
      task_id: r.task_id,
      try_number: r.try_number,
      line_number: r.line_number,
      time: num(r.time),
      stream: r.stream as LogStreamName,
      message: r.message,
    }));
  }

  async putLogLine(l: LogLineRow): Promise<void> {
    await this.#db
      .insertInto('task_logs')
      .values({
        tenant_id: l.tenant_id,
        dag_run_id: l.dag_run_id,
        task_id: l.task_id,
        try_number: l.try_number,
        line_number: l.line_number,
        time: l.time,
        stream: l.stream,
        message: l.message,
      })
      .onConflict((oc) =>
        oc
          .columns(['dag_run_id', 'task_id', 'try_number', 'line_number'])
          .doUpdateSet({ message: l.message, time: l.time, stream: l.stream }),
      )
      .execute();
  }

  async logBytes(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    except_line: number,
  ): Promise<number> {
    const bytes =
      this.dialect === 'postgres'
        ? sql<string | number | null>`sum(octet_length(message))`
        : sql<string | number | null>`sum(length(cast(message as blob)))`;
    const row = await this.#db
      .selectFrom('task_logs')
      .select(bytes.as('bytes'))
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('try_number', '=', try_number)
      .where('line_number', '<>', except_line)
      .executeTakeFirst();
    return Number(row?.bytes ?? 0);
  }

  // ---------------------------------------------------------------- variables

  async putVariable(rec: VariableRecord): Promise<void> {
    const row: Insertable<VariablesTable> = {
      tenant_id: rec.tenant_id,
      key: rec.key,
      value_text: rec.value_text,
      value_cipher: rec.value_cipher === null ? null : toBuffer(rec.value_cipher),
      key_id: rec.key_id,
      is_secret: this.#bool(rec.is_secret),
      description: rec.description,
      created_at: rec.created_at,
      updated_at: rec.updated_at,
    };
    // An overwrite keeps the original created_at: the variable is the same one, re-set.
    await this.#db
      .insertInto('variables')
      .values(row)
      .onConflict((oc) =>
        oc.columns(['tenant_id', 'key']).doUpdateSet((eb) => ({
          value_text: eb.ref('excluded.value_text'),
          value_cipher: eb.ref('excluded.value_cipher'),
          key_id: eb.ref('excluded.key_id'),
          is_secret: eb.ref('excluded.is_secret'),
          description: eb.ref('excluded.description'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .execute();
  }

  async getVariable(tenant_id: string, key: string): Promise<VariableRecord | undefined> {
    const row = await this.#db
      .selectFrom('variables')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('key', '=', key)
      .executeTakeFirst();
    return row && toVariableRecord(row);
  }

  async listVariables(tenant_id: string, page: Page): Promise<VariableRecord[]> {
    const rows = await this.#db
      .selectFrom('variables')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('key')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(toVariableRecord);
  }

  async getVariablesByKeys(tenant_id: string, keys: readonly string[]): Promise<VariableRecord[]> {
    const out: VariableRecord[] = [];
    for (const part of chunks(unique(keys), IN_CHUNK)) {
      const rows = await this.#db
        .selectFrom('variables')
        .selectAll()
        .where('tenant_id', '=', tenant_id)
        .where('key', 'in', part)
        .orderBy('key')
        .execute();
      out.push(...rows.map(toVariableRecord));
    }
    return out;
  }

  async getAllVariables(tenant_id: string): Promise<VariableRecord[]> {
    const rows = await this.#db
      .selectFrom('variables')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('key')
      .execute();
    return rows.map(toVariableRecord);
  }

  async countVariables(tenant_id: string): Promise<number> {
    const row = await this.#db
      .selectFrom('variables')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenant_id)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async deleteVariable(tenant_id: string, key: string): Promise<boolean> {
    const res = await this.#db
      .deleteFrom('variables')
      .where('tenant_id', '=', tenant_id)
      .where('key', '=', key)
      .executeTakeFirst();
    return changed(res.numDeletedRows);
  }

  async existingVariableKeys(tenant_id: string, keys: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const part of chunks(unique(keys), IN_CHUNK)) {
      const rows = await this.#db
        .selectFrom('variables')
        .select('key')
        .where('tenant_id', '=', tenant_id)
        .where('key', 'in', part)
        .execute();
      for (const r of rows) found.add(r.key);
    }
    return found;
  }

  // ---------------------------------------------------------------- connections

  async putConnection(rec: ConnectionRecord): Promise<void> {
    const row: Insertable<ConnectionsTable> = {
      tenant_id: rec.tenant_id,
      conn_id: rec.conn_id,
      conn_type: rec.conn_type,
      host: rec.host,
      login: rec.login,
      schema: rec.schema,
      port: rec.port,
      description: rec.description,
      secret_cipher: rec.secret_cipher === null ? null : toBuffer(rec.secret_cipher),
      key_id: rec.key_id,
      created_at: rec.created_at,
      updated_at: rec.updated_at,
    };
    await this.#db
      .insertInto('connections')
      .values(row)
      .onConflict((oc) =>
        oc.columns(['tenant_id', 'conn_id']).doUpdateSet((eb) => ({
          conn_type: eb.ref('excluded.conn_type'),
          host: eb.ref('excluded.host'),
          login: eb.ref('excluded.login'),
          schema: eb.ref('excluded.schema'),
          port: eb.ref('excluded.port'),
          description: eb.ref('excluded.description'),
          secret_cipher: eb.ref('excluded.secret_cipher'),
          key_id: eb.ref('excluded.key_id'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .execute();
  }

  async getConnection(tenant_id: string, conn_id: string): Promise<ConnectionRecord | undefined> {
    const row = await this.#db
      .selectFrom('connections')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('conn_id', '=', conn_id)
      .executeTakeFirst();
    return row && toConnectionRecord(row);
  }

  async listConnections(tenant_id: string, page: Page): Promise<ConnectionRecord[]> {
    const rows = await this.#db
      .selectFrom('connections')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('conn_id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(toConnectionRecord);
  }

  async getConnectionsByIds(
    tenant_id: string,
    ids: readonly string[],
  ): Promise<ConnectionRecord[]> {
    const out: ConnectionRecord[] = [];
    for (const part of chunks(unique(ids), IN_CHUNK)) {
      if (this.#hot !== undefined) {
        out.push(...this.#hot.connectionsByIds(tenant_id, part));
        continue;
      }
      const rows = await this.#db
        .selectFrom('connections')
        .selectAll()
        .where('tenant_id', '=', tenant_id)
        .where('conn_id', 'in', part)
        .orderBy('conn_id')
        .execute();
      out.push(...rows.map(toConnectionRecord));
    }
    return out;
  }

  async getAllConnections(tenant_id: string): Promise<ConnectionRecord[]> {
    const rows = await this.#db
      .selectFrom('connections')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('conn_id')
      .execute();
    return rows.map(toConnectionRecord);
  }

  async countConnections(tenant_id: string): Promise<number> {
    const row = await this.#db
      .selectFrom('connections')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenant_id)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async deleteConnection(tenant_id: string, conn_id: string): Promise<boolean> {
    const res = await this.#db
      .deleteFrom('connections')
      .where('tenant_id', '=', tenant_id)
      .where('conn_id', '=', conn_id)
      .executeTakeFirst();
    return changed(res.numDeletedRows);
  }

  async existingConnectionIds(tenant_id: string, ids: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const part of chunks(unique(ids), IN_CHUNK)) {
      const rows = await this.#db
        .selectFrom('connections')
        .select('conn_id')
        .where('tenant_id', '=', tenant_id)
        .where('conn_id', 'in', part)
        .execute();
      for (const r of rows) found.add(r.conn_id);
    }
    return found;
  }

  // ---------------------------------------------------------------- key rotation

  async listSealedNotUnderKey(key_id: string, limit: number): Promise<SealedRef[]> {
    if (limit <= 0) return [];
    const vars = await this.#db
      .selectFrom('variables')
      .select(['tenant_id', 'key', 'key_id', 'value_cipher'])
      .where('value_cipher', 'is not', null)
      .where('key_id', '<>', key_id)
      .orderBy('tenant_id')
      .orderBy('key')
      .limit(limit)
      .execute();
    const out: SealedRef[] = [];
    for (const v of vars) {
      if (v.value_cipher === null || v.key_id === null) continue;
      out.push({
        kind: 'variable',
        tenant_id: v.tenant_id,
        id: v.key,
        key_id: v.key_id,
        cipher: new Uint8Array(v.value_cipher),
      });
    }
    const rest = limit - out.length;
    if (rest <= 0) return out;
    const conns = await this.#db
      .selectFrom('connections')
      .select(['tenant_id', 'conn_id', 'key_id', 'secret_cipher'])
      .where('secret_cipher', 'is not', null)
      .where('key_id', '<>', key_id)
      .orderBy('tenant_id')
      .orderBy('conn_id')
      .limit(rest)
      .execute();
    for (const c of conns) {
      if (c.secret_cipher === null || c.key_id === null) continue;
      out.push({
        kind: 'connection',
        tenant_id: c.tenant_id,
        id: c.conn_id,
        key_id: c.key_id,
        cipher: new Uint8Array(c.secret_cipher),
      });
    }
    return out;
  }

  async resealValue(
    kind: SealedKind,
    tenant_id: string,
    id: string,
    expect_key_id: string,
    cipher: Uint8Array,
    new_key_id: string,
    _now: number,
  ): Promise<boolean> {
    return this.#reseal(kind, tenant_id, id, expect_key_id, undefined, cipher, new_key_id);
  }

  async resealIfUnchanged(
    ref: SealedRef,
    cipher: Uint8Array,
    new_key_id: string,
    _now: number,
  ): Promise<boolean> {
    return this.#reseal(
      ref.kind,
      ref.tenant_id,
      ref.id,
      ref.key_id,
      ref.cipher,
      cipher,
      new_key_id,
    );
  }

  // updated_at is left alone on purpose: it tells users when a value was last set, and
  // re-encrypting the same value under another key is not that.
  async #reseal(
    kind: SealedKind,
    tenant_id: string,
    id: string,
    expect_key_id: string,
    expect_cipher: Uint8Array | undefined,
    cipher: Uint8Array,
    new_key_id: string,
  ): Promise<boolean> {
    const next = toBuffer(cipher);
    if (kind === 'variable') {
      let q = this.#db
        .updateTable('variables')
        .set({ value_cipher: next, key_id: new_key_id })
        .where('tenant_id', '=', tenant_id)
        .where('key', '=', id)
        .where('key_id', '=', expect_key_id)
        .where('value_cipher', 'is not', null);
      if (expect_cipher !== undefined) q = q.where('value_cipher', '=', toBuffer(expect_cipher));
      return changed((await q.executeTakeFirst()).numUpdatedRows);
    }
    let q = this.#db
      .updateTable('connections')
      .set({ secret_cipher: next, key_id: new_key_id })
      .where('tenant_id', '=', tenant_id)
      .where('conn_id', '=', id)
      .where('key_id', '=', expect_key_id)
      .where('secret_cipher', 'is not', null);
    if (expect_cipher !== undefined) q = q.where('secret_cipher', '=', toBuffer(expect_cipher));
    return changed((await q.executeTakeFirst()).numUpdatedRows);
  }

  async countSealedByKeyId(): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    const add = (rows: { key_id: string | null; n: number | string | bigint }[]) => {
      for (const r of rows) {
        if (r.key_id === null) continue;
        counts.set(r.key_id, (counts.get(r.key_id) ?? 0) + Number(r.n));
      }
    };
    add(
      await this.#db
        .selectFrom('variables')
        .select((eb) => ['key_id', eb.fn.countAll<number>().as('n')])
        .where('value_cipher', 'is not', null)
        .groupBy('key_id')
        .execute(),
    );
    add(
      await this.#db
        .selectFrom('connections')
        .select((eb) => ['key_id', eb.fn.countAll<number>().as('n')])
        .where('secret_cipher', 'is not', null)
        .groupBy('key_id')
        .execute(),
    );
    return counts;
  }

  // ---------------------------------------------------------------- audit

  async appendAudit(rec: NewAuditRecord): Promise<void> {
    await this.#db
      .insertInto('audit_log')
      .values({
        tenant_id: rec.tenant_id,
        at: rec.at,
        actor: rec.actor,
        action: rec.action,
        resource_type: rec.resource_type,
        resource_id: rec.resource_id,
        request_id: rec.request_id,
        payload_json: JSON.stringify(rec.payload),
      })
      .execute();
  }

  async listAudit(
    tenant_id: string,
    filter: { since?: number; action?: string },
    page: Page,
  ): Promise<AuditRecord[]> {
    let q = this.#db.selectFrom('audit_log').selectAll().where('tenant_id', '=', tenant_id);
    if (filter.since !== undefined) q = q.where('at', '>=', filter.since);
    if (filter.action !== undefined) q = q.where('action', '=', filter.action);
    // Newest first; id breaks ties between events recorded in the same millisecond.
    const rows = await q
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map((r) => ({
      id: num(r.id),
      tenant_id: r.tenant_id,
      at: num(r.at),
      actor: r.actor,
      action: r.action,
      resource_type: r.resource_type,
      resource_id: r.resource_id,
      request_id: r.request_id,
      payload: JSON.parse(r.payload_json) as Record<string, unknown>,
    }));
  }

  // ---------------------------------------------------------------- attempt credentials

  async revokeAttemptCredential(
    task_instance_id: string,
    try_number: number,
    _now: number,
  ): Promise<boolean> {
    // Pinned to the try: revoking an attempt that has already been superseded must not reach
    // the new one. updated_at stays: it orders the scheduler's queue, and this is no state change.
    const res = await this.#db
      .updateTable('task_instances')
      .set({ credential_revoked_try: try_number })
      .where('id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async getAttemptLiveness(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    dispatch_gen?: number,
  ): Promise<{ live: boolean; revoked: boolean }> {
    // One read on the (dag_run_id, task_id) unique index. Deliberately nothing about the run,
    // its age or its logical date: a year-old run that was cleared must work again.
    if (this.#hot !== undefined)
      return this.#hot.attemptLiveness(dag_run_id, task_id, try_number, dispatch_gen);
    const row = await this.#db
      .selectFrom('task_instances')
      .select(['state', 'credential_revoked_try', 'dispatch_gen'])
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('try_number', '=', try_number)
      .executeTakeFirst();
    if (row === undefined) return { live: false, revoked: false };
    return {
      live:
        (row.state === 'queued' || row.state === 'running') &&
        (dispatch_gen === undefined || row.dispatch_gen === dispatch_gen),
      revoked: row.credential_revoked_try === try_number,
    };
  }

  // ---------------------------------------------------------------- helpers

  #bool(v: boolean): DbBool {
    return this.dialect === 'postgres' ? v : v ? 1 : 0;
  }

  #newTaskInstance(
    tenant_id: string,
    dag_id: string,
    dag_run_id: string,
    task: { task_id: string; max_tries: number },
    now: number,
  ): Insertable<TaskInstancesTable> {
    return {
      id: randomUUID(),
      tenant_id,
      dag_run_id,
      dag_id,
      task_id: task.task_id,
      try_number: 1,
      max_tries: task.max_tries,
      state: 'none',
      queued_at: null,
      started_at: null,
      ended_at: null,
      last_heartbeat_at: null,
      retry_at: null,
      exit_code: null,
      error_message: null,
      hostname: null,
      pid: null,
      terminate_requested: this.#bool(false),
      updated_at: now,
    };
  }

  #patchColumns(patch: TaskInstancePatch): Updateable<TaskInstancesTable> {
    // Copy only the patchable keys: a caller spreading a whole row into the patch must not be
    // able to rewrite try_number, ids or the tenant.
    const out: Record<string, unknown> = {};
    for (const key of PATCHABLE_KEYS) {
      const v = patch[key];
      if (v === undefined) continue;
      out[key] = typeof v === 'boolean' ? this.#bool(v) : v;
    }
    return out;
  }

  /**
   * Runs fn in a write transaction. SQLite starts it IMMEDIATE so the write lock is taken up
   * front: a deferred transaction that reads and then writes can fail with SQLITE_BUSY
   * (which busy_timeout does not retry) when another connection wrote in between.
   */
  async #writeTx<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    if (this.dialect === 'postgres') return this.#db.transaction().execute(fn);
    return this.#db.connection().execute(async (conn) => {
      await sql`begin immediate`.execute(conn);
      try {
        const result = await fn(conn);
        await sql`commit`.execute(conn);
        return result;
      } catch (err) {
        await sql`rollback`.execute(conn).catch(() => undefined);
        throw err;
      }
    });
  }
}

// ------------------------------------------------------------------ row mapping

/** pg hands back int8 as numbers via the pool's type parsers; this also guards stray strings. */
interface PendingRenewals {
  pending_renewals: number | string | bigint | null;
  pending_renewed_at: number | string | bigint | null;
  pending_credential_exp: number | string | bigint | null;
}

function attemptRecordRow(
  r: Selectable<Database['attempt_records']> & PendingRenewals,
): AttemptRecordRow {
  const names = (v: string | null): string[] | null =>
    v === null ? null : (JSON.parse(v) as string[]);
  const pending = r.pending_renewals === null ? 0 : num(r.pending_renewals);
  const renewedAt = pending > 0 ? numOrNull(r.pending_renewed_at) : null;
  return {
    task_instance_id: r.task_instance_id,
    try_number: num(r.try_number),
    tenant_id: r.tenant_id,
    dag_id: r.dag_id,
    dag_run_id: r.dag_run_id,
    run_id: r.run_id,
    task_id: r.task_id,
    session_hash: r.session_hash,
    registered_at: numOrNull(r.registered_at),
    scoping_mode: r.scoping_mode,
    liveness_mode: r.liveness_mode,
    variables_delivered: names(r.variables_delivered),
    connections_delivered: names(r.connections_delivered),
    variables_refusal: r.variables_refusal,
    connections_refusal: r.connections_refusal,
    renewals: num(r.renewals) + pending,
    last_renewed_at: renewedAt ?? numOrNull(r.last_renewed_at),
    renewal_stopped: r.renewal_stopped,
    credential_exp: pending > 0 ? numOrNull(r.pending_credential_exp) : numOrNull(r.credential_exp),
    undeclared_reads:
      r.undeclared_reads === null ? null : (JSON.parse(r.undeclared_reads) as UndeclaredReads),
    created_at: num(r.created_at),
    updated_at: Math.max(num(r.updated_at), renewedAt ?? 0),
  };
}

function num(v: number | string | bigint): number {
  return typeof v === 'number' ? v : Number(v);
}

function numOrNull(v: number | string | bigint | null): number | null {
  return v === null ? null : num(v);
}

function fromBool(v: DbBool): boolean {
  return v === true || v === 1;
}

function changed(n: bigint | number | undefined): boolean {
  return n !== undefined && Number(n) > 0;
}

function toBuffer(v: Uint8Array): Buffer {
  return Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

function unique(items: readonly string[]): string[] {
  return [...new Set(items)];
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

function toDagRow(r: Selectable<DagsTable>): DagRow {
  return {
    tenant_id: r.tenant_id,
    dag_id: r.dag_id,
    current_version: r.current_version,
    is_paused: fromBool(r.is_paused),
    last_scheduled_logical_date: numOrNull(r.last_scheduled_logical_date),
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
  };
}

function toRunRow(r: Selectable<DagRunsTable>): DagRunRow {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    dag_id: r.dag_id,
    run_id: r.run_id,
    dag_version: r.dag_version,
    run_type: r.run_type as RunType,
    state: r.state as DagRunState,
    logical_date: numOrNull(r.logical_date),
    data_interval_start: numOrNull(r.data_interval_start),
    data_interval_end: numOrNull(r.data_interval_end),
    conf: JSON.parse(r.conf_json) as Record<string, unknown>,
    created_at: num(r.created_at),
    started_at: numOrNull(r.started_at),
    ended_at: numOrNull(r.ended_at),
  };
}

function toTaskInstanceRow(r: Selectable<TaskInstancesTable>): TaskInstanceRow {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    dag_run_id: r.dag_run_id,
    dag_id: r.dag_id,
    task_id: r.task_id,
    try_number: r.try_number,
    max_tries: r.max_tries,
    state: r.state as TaskInstanceState,
    queued_at: numOrNull(r.queued_at),
    started_at: numOrNull(r.started_at),
    ended_at: numOrNull(r.ended_at),
    last_heartbeat_at: numOrNull(r.last_heartbeat_at),
    retry_at: numOrNull(r.retry_at),
    exit_code: r.exit_code,
    error_message: r.error_message,
    hostname: r.hostname,
    pid: r.pid,
    terminate_requested: fromBool(r.terminate_requested),
    updated_at: num(r.updated_at),
    // Absent on a database still short of migration 0004 (an upgrade in progress): 0.
    dispatch_gen: Number(r.dispatch_gen ?? 0),
  };
}

function toHistoryRow(r: Selectable<TaskInstanceHistoryTable>): TaskInstanceHistoryRow {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    dag_run_id: r.dag_run_id,
    task_id: r.task_id,
    try_number: r.try_number,
    state: r.state as TaskInstanceState,
    started_at: numOrNull(r.started_at),
    ended_at: numOrNull(r.ended_at),
    exit_code: r.exit_code,
    error_message: r.error_message,
    archived_at: num(r.archived_at),
  };
}

function toXComRow(r: Selectable<XComTable>): XComRow {
  return {
    tenant_id: r.tenant_id,
    dag_run_id: r.dag_run_id,
    task_id: r.task_id,
    key: r.key,
    // A plain Uint8Array copy: callers get the declared type, not a Buffer that may be a view
    // into the driver's shared pool.
    value: new Uint8Array(r.value),
    content_type: r.content_type,
    created_at: num(r.created_at),
  };
}

function toVariableRecord(r: Selectable<VariablesTable>): VariableRecord {
  return {
    tenant_id: r.tenant_id,
    key: r.key,
    value_text: r.value_text,
    value_cipher: r.value_cipher === null ? null : new Uint8Array(r.value_cipher),
    key_id: r.key_id,
    is_secret: fromBool(r.is_secret),
    description: r.description,
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
  };
}

function toConnectionRecord(r: Selectable<ConnectionsTable>): ConnectionRecord {
  return {
    tenant_id: r.tenant_id,
    conn_id: r.conn_id,
    conn_type: r.conn_type,
    host: r.host,
    login: r.login,
    schema: r.schema,
    port: r.port,
    description: r.description,
    secret_cipher: r.secret_cipher === null ? null : new Uint8Array(r.secret_cipher),
    key_id: r.key_id,
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
  };
}

/** SQLite (better-sqlite3) and PostgreSQL (pg) report unique/PK violations differently. */
export function isUniqueViolation(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  return (
    code === '23505' ||
    code === 'SQLITE_CONSTRAINT_PRIMARYKEY' ||
    code === 'SQLITE_CONSTRAINT_UNIQUE'
  );
}

function apiTokenRow(r: Selectable<ApiTokensTable>): ApiTokenRow {
  return {
    jti: r.jti,
    tenant_id: r.tenant_id,
    name: r.name,
    role: r.role,
    created_by: r.created_by,
    created_at: num(r.created_at),
    expires_at: r.expires_at === null ? null : num(r.expires_at),
    revoked_at: r.revoked_at === null ? null : num(r.revoked_at),
    revoked_by: r.revoked_by,
  };
}
