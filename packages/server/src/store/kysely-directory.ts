import { retryingForeignSchemaDrops, isForeignDrop } from './concurrent-schema-drop.js';
import { StoreError } from '@leoflow/core';
import { Migrator, type Kysely } from 'kysely';
import type { Database } from './db-types.js';
import { directoryMigrationProvider } from './directory-migrations.js';
import { KyselyCellStore } from './kysely/cells.js';
import { composeSeams } from './kysely/compose.js';
import { KyselyRunnerTokenSealStore } from './kysely/runner-token-seals.js';
import { KyselyRunnerStore } from './kysely/runners.js';
import type { StoreDialect } from './migrations.js';
import { openPostgresKysely, openSqliteKysely } from './open-store.js';
import type { CellStore } from './ports/cells.js';
import type { RunnerTokenSealStore } from './ports/runner-token-seals.js';
import type { RunnerStore } from './ports/runners.js';
import { KyselyStore } from './kysely-store.js';
import type { Store } from './store.js';

export const DIRECTORY_MIGRATION_TABLE = 'leoflow_directory_migration';
export const DIRECTORY_MIGRATION_LOCK_TABLE = 'leoflow_directory_migration_lock';

/**
 * The directory port: runners (and their token hashes), cells and tenant placements — what the
 * door reads before it may contact any cell. Never a cell's own store (docs/runners.md). The
 * runners' sealed tokens are re-encrypted by a cell's key rotation (RunnerTokenSealStore).
 */
export interface Directory extends RunnerStore, RunnerTokenSealStore, CellStore {
  readonly dialect: StoreDialect;
  migrate(): Promise<void>;
  close(): Promise<void>;
}

export type OpenDirectoryOptions =
  /** Lite: the cell store's own SQLite handle (same file); the store keeps owning it */
  | { kind: 'shared'; db: Kysely<Database>; dialect: StoreDialect; schema?: string }
  | { kind: 'sqlite'; file: string }
  /** Pro: a PostgreSQL schema of its own, never a cell's */
  | { kind: 'postgres'; url: string; schema: string };

class KyselyDirectory
  extends composeSeams(KyselyRunnerStore, KyselyRunnerTokenSealStore, KyselyCellStore)
  implements Directory
{
  readonly dialect: StoreDialect;
  readonly #db: Kysely<Database>;
  readonly #schema: string | undefined;
  readonly #owned: boolean;
  #closed = false;

  constructor(
    db: Kysely<Database>,
    dialect: StoreDialect,
    schema: string | undefined,
    owned: boolean,
  ) {
    super({ db, dialect, hot: undefined });
    this.#db = db;
    this.dialect = dialect;
    this.#schema = schema;
    this.#owned = owned;
  }

  async migrate(): Promise<void> {
    const migrator = new Migrator({
      db: this.#db,
      provider: directoryMigrationProvider(this.dialect),
      migrationTableName: DIRECTORY_MIGRATION_TABLE,
      migrationLockTableName: DIRECTORY_MIGRATION_LOCK_TABLE,
      ...(this.#schema !== undefined ? { migrationTableSchema: this.#schema } : {}),
    });
    const { error, results } = await retryingForeignSchemaDrops(
      this.#schema ?? 'public',
      async () => {
        const outcome = await migrator.migrateToLatest();
        // a catalog race surfaces as a result error; throw it so the retry sees it
        if (outcome.error !== undefined && isForeignDrop(outcome.error, this.#schema ?? 'public')) {
          // isForeignDrop only matches Error objects
          throw outcome.error as Error;
        }
        return outcome;
      },
    );
    if (error !== undefined) {
      const failed = results?.find((r) => r.status === 'Error')?.migrationName;
      const cause = error instanceof Error ? error.message : JSON.stringify(error);
      throw Object.assign(
        new StoreError(
          'LF_STORE_MIGRATION_FAILED',
          `directory migration ${failed ?? '(setup)'} failed on ${this.dialect}: ${cause}`,
          { dialect: this.dialect, migration: failed ?? null },
        ),
        { cause: error },
      );
    }
  }

  async close(): Promise<void> {
    if (this.#closed || !this.#owned) return;
    this.#closed = true;
    await this.#db.destroy();
  }
}

/** Opens (does not migrate) the directory; call migrate() at boot, as for the store. */
export async function openDirectory(opts: OpenDirectoryOptions): Promise<Directory> {
  if (opts.kind === 'shared') return new KyselyDirectory(opts.db, opts.dialect, opts.schema, false);
  if (opts.kind === 'sqlite') {
    return new KyselyDirectory(openSqliteKysely(opts.file), 'sqlite', undefined, true);
  }
  const { kysely, schema } = await openPostgresKysely(opts.url, opts.schema);
  return new KyselyDirectory(kysely, 'postgres', schema, true);
}

/**
 * Lite's directory: the cell store's own SQLite file and handle (its own migration
 * bookkeeping), so the one-file backup holds it too. Refused on PostgreSQL, where the
 * directory must be a schema of its own (openDirectory with kind 'postgres').
 */
export function directoryOnStore(store: Store): Promise<Directory> {
  if (!(store instanceof KyselyStore) || store.dialect !== 'sqlite') {
    throw new StoreError(
      'LF_STORE_SCHEMA_INVALID',
      'the directory shares the store only on SQLite (Lite); on PostgreSQL give it its own schema',
    );
  }
  return openDirectory({ kind: 'shared', db: store.kysely, dialect: 'sqlite' });
}
