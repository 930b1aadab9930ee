import BetterSqlite3 from 'better-sqlite3';
import { isActive, type TaskInstanceState } from '@leoflow/core';
import type { AttemptFence, RunSpecRef } from './store.js';
import { grantsOf } from './kysely/columns.js';
import type { ConnectionRecord } from './vault-types.js';

/** Distinct `in (...)` list lengths whose prepared statement is kept (a task's declared count). */
const MAX_CACHED_IN_LENGTHS = 64;

// Column order of the raw rows below; toConnection reads them by position.
const CONNECTION_COLUMNS =
  'tenant_id, conn_id, conn_type, host, login, schema, port, description, secret_cipher, key_id, created_at, updated_at, dag_grants';

type RawConnection = [
  string,
  string,
  string,
  string | null,
  string | null,
  string | null,
  number | null,
  string,
  Buffer | null,
  string | null,
  number,
  number,
  string | null,
];

/**
 * The agent hot path's reads (GetVariables / GetConnections: attempt liveness, the run's
 * spec reference, the declared connections; PushLogs: its write fence) on a second, READ-ONLY connection to the store's
 * SQLite file, each statement prepared once.
 *
 * Why a second connection rather than the store's own: Kysely's SQLite driver runs everything
 * on one connection behind a mutex (a few dozen concurrent callers all wake on every release)
 * and prepares every statement anew; and a write transaction holds that connection across
 * awaits, so a fast path there could read a transaction's uncommitted rows. This connection
 * never writes. In WAL mode each of its statements reads the latest COMMITTED snapshot as of
 * the statement's start — never another connection's uncommitted writes, and without waiting
 * for a writer — the same isolation a PostgreSQL read has. Every statement runs to completion
 * synchronously (better-sqlite3 resets it after `get`/`all`), so no read transaction, and so
 * no stale snapshot, outlives a call: liveness is read fresh every time.
 *
 * Statements are prepared lazily, on first use, so the reader can be opened before `migrate()`
 * creates the tables. Nothing read here is cached; only the compiled SQL is.
 */
export class SqliteHotReads {
  readonly #db: BetterSqlite3.Database;
  #liveness: BetterSqlite3.Statement<unknown[], LivenessRow> | undefined;
  #runRef: BetterSqlite3.Statement<unknown[], RunSpecRef> | undefined;
  #fence: BetterSqlite3.Statement<unknown[], FenceRow> | undefined;
  readonly #connectionsByLength = new Map<number, BetterSqlite3.Statement<unknown[], unknown[]>>();

  /** `file` must already exist and be in WAL mode (the writer opens it first). */
  constructor(file: string) {
    const db = new BetterSqlite3(file, { readonly: true, fileMustExist: true });
    try {
      // As the writer: a reader can still meet a lock held by another process (WAL recovery,
      // a checkpoint that truncates), and then waits rather than failing at once.
      db.pragma('busy_timeout = 5000');
      if (db.pragma('journal_mode', { simple: true }) !== 'wal') {
        // Without WAL a reader and the writer lock each other out; the store then keeps reading
        // through Kysely.
        throw new Error('sqlite hot reads need a database in WAL mode');
      }
    } catch (err) {
      db.close();
      throw err;
    }
    this.#db = db;
  }

  attemptLiveness(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    dispatch_gen?: number,
    map_index = -1,
  ): { live: boolean; revoked: boolean } {
    this.#liveness ??= this.#db.prepare<unknown[], LivenessRow>(
      'select state, credential_revoked_try, dispatch_gen from task_instances ' +
        'where dag_run_id = ? and task_id = ? and map_index = ? and try_number = ?',
    );
    const row = this.#liveness.get(dag_run_id, task_id, map_index, try_number);
    if (row === undefined) return { live: false, revoked: false };
    return {
      live:
        isActive(row.state as TaskInstanceState) &&
        (dispatch_gen === undefined || row.dispatch_gen === dispatch_gen),
      revoked: row.credential_revoked_try === try_number,
    };
  }

  attemptFence(task_instance_id: string): AttemptFence | undefined {
    this.#fence ??= this.#db.prepare<unknown[], FenceRow>(
      'select tenant_id, dag_run_id, task_id, map_index, try_number, dispatch_gen, state, ended_at ' +
        'from task_instances where id = ?',
    );
    const row = this.#fence.get(task_instance_id);
    if (row === undefined) return undefined;
    return {
      tenant_id: row.tenant_id,
      dag_run_id: row.dag_run_id,
      task_id: row.task_id,
      map_index: Number(row.map_index),
      try_number: Number(row.try_number),
      dispatch_gen: Number(row.dispatch_gen),
      state: row.state as AttemptFence['state'],
      ended_at: row.ended_at === null ? null : Number(row.ended_at),
    };
  }

  runSpecRef(id: string): RunSpecRef | undefined {
    this.#runRef ??= this.#db.prepare<unknown[], RunSpecRef>(
      'select tenant_id, dag_id, dag_version from dag_runs where id = ?',
    );
    const row = this.#runRef.get(id);
    return row && { tenant_id: row.tenant_id, dag_id: row.dag_id, dag_version: row.dag_version };
  }

  /** `ids` distinct and non-empty; ordered by conn_id, exactly the rows that exist. */
  connectionsByIds(tenant_id: string, ids: readonly string[]): ConnectionRecord[] {
    const rows = this.#connectionsStatement(ids.length).all(tenant_id, ...ids) as RawConnection[];
    const out = new Array<ConnectionRecord>(rows.length);
    for (let i = 0; i < rows.length; i++) out[i] = toConnection(rows[i]!);
    return out;
  }

  close(): void {
    this.#db.close();
  }

  #connectionsStatement(n: number): BetterSqlite3.Statement<unknown[], unknown[]> {
    let stmt = this.#connectionsByLength.get(n);
    if (stmt === undefined) {
      if (this.#connectionsByLength.size >= MAX_CACHED_IN_LENGTHS) {
        const oldest = this.#connectionsByLength.keys().next().value;
        if (oldest !== undefined) this.#connectionsByLength.delete(oldest);
      }
      const list = new Array<string>(n).fill('?').join(', ');
      stmt = this.#db
        .prepare<unknown[], unknown[]>(
          `select ${CONNECTION_COLUMNS} from connections ` +
            `where tenant_id = ? and conn_id in (${list}) order by conn_id`,
        )
        .raw(true);
      this.#connectionsByLength.set(n, stmt);
    }
    return stmt;
  }
}

interface FenceRow {
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  map_index: number;
  try_number: number;
  dispatch_gen: number;
  state: string;
  ended_at: number | null;
}

interface LivenessRow {
  state: string;
  credential_revoked_try: number | null;
  dispatch_gen: number;
}

/** The same record toConnectionRecord (kysely/connections.ts) builds from the same row. */
function toConnection(r: RawConnection): ConnectionRecord {
  const cipher = r[8];
  return {
    tenant_id: r[0],
    conn_id: r[1],
    conn_type: r[2],
    host: r[3],
    login: r[4],
    schema: r[5],
    port: r[6],
    description: r[7],
    // better-sqlite3 gives every blob a backing store of its own, exactly its size: a plain
    // Uint8Array view of it is what the Kysely path's copy would be, without the copy.
    secret_cipher:
      cipher === null ? null : new Uint8Array(cipher.buffer, cipher.byteOffset, cipher.byteLength),
    key_id: r[9],
    created_at: Number(r[10]),
    updated_at: Number(r[11]),
    // the grants delivery checks before anything is decrypted (issue 34)
    dag_grants: grantsOf(r[12]),
  };
}
