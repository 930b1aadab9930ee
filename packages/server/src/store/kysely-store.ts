import { StoreError } from '@leoflow/core';
import { Migrator } from 'kysely';
import type { Kysely } from 'kysely';
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
import { KyselyTaskInstanceStore } from './kysely/task-instances.js';
import { KyselyTenantStore } from './kysely/tenants.js';
import { KyselyUiSessionStore } from './kysely/ui-sessions.js';
import { KyselyVariableStore } from './kysely/variables.js';
import { KyselyXComStore } from './kysely/xcom.js';
import { migrationProvider, type StoreDialect } from './migrations.js';
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
  )
  implements Store
{
  readonly dialect: StoreDialect;
  readonly #db: Kysely<Database>;
  readonly #schema: string | undefined;
  readonly #hot: SqliteHotReads | undefined;
  #closed = false;

  constructor(db: Kysely<Database>, opts: KyselyStoreOptions) {
    super({ db, dialect: opts.dialect, hot: opts.hotReads });
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
}
