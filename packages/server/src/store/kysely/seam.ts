import { sql, type Kysely } from 'kysely';
import type { Database, DbBool } from '../db-types.js';
import type { StoreDialect } from '../migrations.js';
import type { SqliteHotReads } from '../sqlite-hot-reads.js';

/** What every seam of the Kysely store shares: one database handle and its dialect. */
export interface StoreHandle {
  db: Kysely<Database>;
  dialect: StoreDialect;
  /** SQLite on a file: the read-only connection for the agent secret path (sqlite-hot-reads.ts) */
  hot: SqliteHotReads | undefined;
}

export type Tx = Kysely<Database>;

/**
 * Base of the per-seam classes (one per file beside this one). The few dialect differences
 * (boolean encoding, how a write transaction starts) live here; row locks are `forUpdate()` on
 * PostgreSQL only, at the call sites.
 */
export abstract class KyselySeam {
  protected readonly db: Kysely<Database>;
  protected readonly dialect: StoreDialect;
  protected readonly hot: SqliteHotReads | undefined;

  constructor(h: StoreHandle) {
    this.db = h.db;
    this.dialect = h.dialect;
    this.hot = h.hot;
  }

  protected bool(v: boolean): DbBool {
    return dbBool(this.dialect, v);
  }

  /**
   * Runs fn in a write transaction. SQLite starts it IMMEDIATE so the write lock is taken up
   * front: a deferred transaction that reads and then writes can fail with SQLITE_BUSY
   * (which busy_timeout does not retry) when another connection wrote in between.
   */
  protected async writeTx<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    if (this.dialect === 'postgres') return this.db.transaction().execute(fn);
    return this.db.connection().execute(async (conn) => {
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

export function dbBool(dialect: StoreDialect, v: boolean): DbBool {
  return dialect === 'postgres' ? v : v ? 1 : 0;
}
