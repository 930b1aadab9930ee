import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery, Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { StoreError } from '@leoflow/core';
import type { Database } from './db-types.js';
import { KyselyStore } from './kysely-store.js';
import { SqliteHotReads } from './sqlite-hot-reads.js';
import type { Store } from './store.js';

export type OpenStoreOptions =
  | { kind: 'sqlite'; file: string }
  | {
      kind: 'postgres';
      url: string;
      schema?: string;
      /** connections in the pool (default 10); the scheduler lease keeps its own small one */
      poolSize?: number;
      /** a query with no answer after this long fails (client side); default none */
      queryTimeoutMs?: number;
    };

/**
 * Opens (does not migrate) a store. Call `migrate()` before first use; it is cheap and
 * idempotent, so every process may call it at boot.
 */
export async function openStore(opts: OpenStoreOptions): Promise<Store> {
  return opts.kind === 'sqlite'
    ? openSqlite(opts.file)
    : openPostgres(opts.url, opts.schema, opts.poolSize ?? 10, opts.queryTimeoutMs);
}

function openSqlite(file: string): KyselyStore {
  const kysely = openSqliteKysely(file);
  const hotReads = file === ':memory:' ? undefined : openHotReads(file);
  return new KyselyStore(kysely, { dialect: 'sqlite', ...(hotReads ? { hotReads } : {}) });
}

/** The writer connection of a SQLite file, with the pragmas every Leoflow connection sets. */
export function openSqliteKysely(file: string): Kysely<Database> {
  // ':memory:' stays usable for fast unit tests elsewhere; it has no file to protect.
  if (file !== ':memory:') createPrivateFile(file);
  const db = new BetterSqlite3(file);
  try {
    // busy_timeout first, so switching to WAL waits for a lock instead of failing outright.
    db.pragma('busy_timeout = 5000');
    db.pragma('journal_mode = WAL');
    db.pragma('foreign_keys = ON');
    // With WAL, NORMAL is durable against application crashes and keeps the database
    // consistent across power loss; it only risks the last commits on an OS crash.
    db.pragma('synchronous = NORMAL');
    // Freed pages are zeroed, so a value changed from plain to secret (or a deleted secret's
    // ciphertext) does not linger in the file's free space. Per connection; `leoflow doctor`
    // reports it.
    db.pragma('secure_delete = ON');
  } catch (err) {
    db.close();
    throw err;
  }
  return new Kysely<Database>({ dialect: new SqliteDialect({ database: db }) });
}

/**
 * The read-only connection for the agent secret path (opened after the writer switched the file
 * to WAL). It is only a speed-up: if it cannot be opened, those reads stay on the writer's
 * connection through Kysely, with the same results.
 */
function openHotReads(file: string): SqliteHotReads | undefined {
  try {
    return new SqliteHotReads(file);
  } catch {
    return undefined;
  }
}

/**
 * The database holds connection secrets (encrypted) and everything else a tenant owns, so the
 * file is created owner-only before SQLite ever sees it. SQLite gives its -wal and -shm
 * companions the same permission bits as the main file.
 */
function createPrivateFile(file: string): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  try {
    closeSync(openSync(file, 'wx', 0o600));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

const PG_INT8: number = pg.types.builtins.INT8;
const PG_NUMERIC: number = pg.types.builtins.NUMERIC;

// Per-pool parsers rather than pg.types.setTypeParser, which would change every pg user in
// the process. Epoch-ms values and counts fit comfortably in a double.
const pgTypes: pg.CustomTypesConfig = {
  getTypeParser: (oid, format) => {
    const id: number = oid;
    if (format !== 'binary' && (id === PG_INT8 || id === PG_NUMERIC)) {
      return (value: string) => Number(value);
    }
    return pg.types.getTypeParser(oid, format) as unknown;
  },
};

async function openPostgres(
  url: string,
  schema: string | undefined,
  poolSize: number,
  queryTimeoutMs: number | undefined,
): Promise<KyselyStore> {
  const { kysely, schema: effective } = await openPostgresKysely(url, schema, {
    poolSize,
    queryTimeoutMs,
  });
  return new KyselyStore(kysely, { dialect: 'postgres', schema: effective });
}

/**
 * A pool on `url` whose connections put `schema` (created if missing) first on the search
 * path, and the schema in effect.
 */
export async function openPostgresKysely(
  url: string,
  schema: string | undefined,
  poolOptions: { poolSize?: number; queryTimeoutMs?: number | undefined } = {},
): Promise<{ kysely: Kysely<Database>; schema: string }> {
  const poolSize = poolOptions.poolSize ?? 10;
  const queryTimeoutMs = poolOptions.queryTimeoutMs;
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    ...(queryTimeoutMs !== undefined ? { query_timeout: queryTimeoutMs } : {}),
    types: pgTypes,
    // Fail a request instead of hanging forever when the server is unreachable.
    connectionTimeoutMillis: 10_000,
  });
  // An idle client dying (server restart, network blip) is emitted on the pool; without a
  // listener that would crash the process. The pool has already discarded the client and the
  // next checkout reconnects, so there is nothing else to do here.
  pool.on('error', () => undefined);
  // A checked-out client has no pool listener: the server ending its connection between two
  // statements (a restart's "terminating connection due to administrator command", a reset)
  // is emitted on the client itself, and unheard it killed the replica (test/e2e/pro-faults,
  // PostgreSQL restart). The client is no longer queryable: the statement in flight, or the
  // next one, fails with the connection's error, and the pool discards the client on release.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });

  const searchPath = schema === undefined ? undefined : quoteIdent(schema);
  const kysely = new Kysely<Database>({
    dialect: new PostgresDialect({
      pool,
      ...(searchPath === undefined
        ? {}
        : {
            onCreateConnection: async (conn) => {
              await conn.executeQuery(CompiledQuery.raw(`SET search_path TO ${searchPath}`));
            },
          }),
    }),
  });

  try {
    if (searchPath !== undefined) {
      try {
        await sql.raw(`CREATE SCHEMA IF NOT EXISTS ${searchPath}`).execute(kysely);
      } catch (err) {
        // IF NOT EXISTS still races between two concurrent creators; losing that race is fine.
        const code = (err as { code?: unknown }).code;
        if (code !== '23505' && code !== '42P06') throw err;
      }
    }
    const { rows } = await sql<{ s: string | null }>`select current_schema() as s`.execute(kysely);
    const effective = rows[0]?.s ?? null;
    if (effective === null) {
      throw new StoreError(
        'LF_STORE_SCHEMA_INVALID',
        'postgres store: no schema on the search_path exists; pass `schema` or create one',
      );
    }
    return { kysely, schema: effective };
  } catch (err) {
    await kysely.destroy();
    throw err;
  }
}

function quoteIdent(name: string): string {
  if (name.length === 0 || name.length > 63 || name.includes('\0')) {
    throw new StoreError(
      'LF_STORE_SCHEMA_INVALID',
      `postgres store: invalid schema name ${JSON.stringify(name)}`,
    );
  }
  return `"${name.replace(/"/g, '""')}"`;
}
