import { retryingForeignSchemaDrops } from './concurrent-schema-drop.js';
import { StoreError } from '@leoflow/core';
import { Migrator, sql } from 'kysely';
import type { Kysely, MigrationProvider } from 'kysely';
import type { Database } from './db-types.js';
import { KyselyApiTokenStore } from './kysely/api-tokens.js';
import { KyselyAttemptCredentialStore } from './kysely/attempt-credentials.js';
import { KyselyAttemptRecordStore } from './kysely/attempt-records.js';
import { KyselyAuditStore } from './kysely/audit.js';
import { composeSeams } from './kysely/compose.js';
import { KyselyConnectionStore } from './kysely/connections.js';
import { KyselyDagStore } from './kysely/dags.js';
import { KyselyLogStore } from './kysely/logs.js';
import { KyselyRunStore } from './kysely/runs.js';
import { KyselySealedValueStore } from './kysely/sealed-values.js';
import { KyselySecretGrantStore } from './kysely/secret-grants.js';
import { KyselyTaskInstanceStore } from './kysely/task-instances.js';
import { KyselyTenantStore } from './kysely/tenants.js';
import { KyselyUiSessionStore } from './kysely/ui-sessions.js';
import { KyselyVariableStore } from './kysely/variables.js';
import { KyselyWarmPoolMemberStore } from './kysely/warm-pool-members.js';
import { KyselyXComStore } from './kysely/xcom.js';
import { migrationProvider, type StoreDialect } from './migrations.js';
import { compareSchema, schemaNewerError } from './schema-status.js';
import type { SqliteHotReads } from './sqlite-hot-reads.js';
import type { Store } from './store.js';

export { isUniqueViolation } from './kysely/columns.js';

export const MIGRATION_TABLE = 'leoflow_migration';
export const MIGRATION_LOCK_TABLE = 'leoflow_migration_lock';

export interface KyselyStoreOptions {
  dialect: StoreDialect;
  /** PostgreSQL: the schema that holds the tables (and the migration bookkeeping). */
  schema?: string;
  /**
   * SQLite on a file: a second, read-only connection for the agent secret path's reads
   * (sqlite-hot-reads.ts). The store owns it from here on and closes it.
   */
  hotReads?: SqliteHotReads;
  /** Tests only: another migration list in place of the build's (migrations.ts). */
  migrations?: MigrationProvider;
}

/**
 * The text PostgreSQL hashes (`hashtextextended(name, 0)`) into the advisory-lock key replicas
 * serialise their migration on: one per schema, so two schemas in one database migrate
 * independently, and the same key whatever the client.
 */
export function migrationLockName(schema: string): string {
  return `leoflow.migrate:${schema}`;
}

/**
 * The single Store implementation: the per-seam classes in ./kysely/ (one file each, all over
 * the same database handle), composed, plus the lifecycle (migrations, close). Every method
 * reads and writes through Kysely; the few dialect differences are in kysely/seam.ts, and the
 * SQLite secret-path reads in sqlite-hot-reads.ts.
 */
export class KyselyStore
  extends composeSeams(
    KyselyTenantStore,
    KyselyApiTokenStore,
    KyselyDagStore,
    KyselyRunStore,
    KyselyTaskInstanceStore,
    KyselyAttemptRecordStore,
    KyselyXComStore,
    KyselyLogStore,
    KyselyVariableStore,
    KyselyConnectionStore,
    KyselySealedValueStore,
    KyselyAuditStore,
    KyselyAttemptCredentialStore,
    KyselyUiSessionStore,
    KyselyWarmPoolMemberStore,
    KyselySecretGrantStore,
  )
  implements Store
{
  readonly dialect: StoreDialect;
  readonly #db: Kysely<Database>;
  readonly #schema: string | undefined;
  readonly #hot: SqliteHotReads | undefined;
  readonly #migrations: MigrationProvider;
  #closed = false;

  constructor(db: Kysely<Database>, opts: KyselyStoreOptions) {
    super({ db, dialect: opts.dialect, hot: opts.hotReads });
    this.#db = db;
    this.dialect = opts.dialect;
    this.#schema = opts.schema;
    this.#hot = opts.hotReads;
    this.#migrations = opts.migrations ?? migrationProvider(opts.dialect);
  }

  /** Escape hatch for tests and tooling; production code goes through the Store methods. */
  get kysely(): Kysely<Database> {
    return this.#db;
  }

  #migrator(db: Kysely<Database> = this.#db): Migrator {
    return new Migrator({
      db,
      provider: this.#migrations,
      migrationTableName: MIGRATION_TABLE,
      migrationLockTableName: MIGRATION_LOCK_TABLE,
      // Without an explicit schema Kysely's "does the table exist" probe matches the table in
      // any schema, so a second schema in the same database would skip creating its own.
      ...(this.#schema !== undefined ? { migrationTableSchema: this.#schema } : {}),
    });
  }

  /**
   * Applies every pending migration, once, however many replicas call it at the same moment.
   *
   * On PostgreSQL the whole step — reading the bookkeeping, refusing a newer schema, creating
   * the bookkeeping tables and applying — runs on one connection holding a session advisory
   * lock keyed on the schema: the first replica migrates, the others wait on the lock and then
   * find nothing pending. A replica that dies mid-migration ends its session, which releases
   * the lock; its migration's transaction rolls back and the next waiter applies it. SQLite
   * (Lite) is one process and needs no lock.
   *
   * A database that has applied a migration this build does not know was migrated by a newer
   * release: this refuses to start (LF_STORE_SCHEMA_NEWER) rather than run old code on it.
   */
  async migrate(): Promise<void> {
    if (this.dialect !== 'postgres') {
      await this.#migrateOn(this.#db);
      return;
    }
    const schema = this.#schema ?? 'public';
    await retryingForeignSchemaDrops(schema, () => this.#migrateLocked(schema));
  }

  async #migrateLocked(schema: string): Promise<void> {
    await this.#db.connection().execute(async (conn) => {
      await sql`select pg_advisory_lock(hashtextextended(${migrationLockName(schema)}, 0))`.execute(
        conn,
      );
      try {
        await this.#migrateOn(conn);
      } finally {
        await sql`select pg_advisory_unlock(hashtextextended(${migrationLockName(schema)}, 0))`.execute(
          conn,
        );
      }
    });
  }

  async #migrateOn(db: Kysely<Database>): Promise<void> {
    const status = compareSchema(await this.#knownNames(), await this.#appliedNames(db));
    if (status.unknown.length > 0) throw schemaNewerError(status, this.dialect);
    if (status.pending.length === 0) return;
    const { error, results } = await this.#migrator(db).migrateToLatest();
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

  async #knownNames(): Promise<string[]> {
    return Object.keys(await this.#migrations.getMigrations()).sort();
  }

  /** Every name in the bookkeeping table, known to this build or not; [] before the first run. */
  async #appliedNames(db: Kysely<Database>): Promise<string[]> {
    const exists =
      this.dialect === 'postgres'
        ? await sql<{
            found: boolean;
          }>`select to_regclass(${`${quoteIdent(this.#schema ?? 'public')}.${MIGRATION_TABLE}`}) is not null as found`.execute(
            db,
          )
        : await sql<{
            found: number;
          }>`select count(*) as found from sqlite_master where type = 'table' and name = ${MIGRATION_TABLE}`.execute(
            db,
          );
    if (!exists.rows[0]?.found) return [];
    const table =
      this.#schema !== undefined
        ? sql.table(`${this.#schema}.${MIGRATION_TABLE}`)
        : sql.table(MIGRATION_TABLE);
    const { rows } = await sql<{ name: string }>`select name from ${table}`.execute(db);
    return rows.map((r) => r.name).sort();
  }

  async migrationStatus(): Promise<{ applied: string[]; pending: string[]; unknown: string[] }> {
    // Read-only: the bookkeeping table is read if it exists and never created here.
    const status = compareSchema(await this.#knownNames(), await this.#appliedNames(this.#db));
    return {
      applied: status.applied.filter((n) => !status.unknown.includes(n)),
      pending: status.pending,
      unknown: status.unknown,
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
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
