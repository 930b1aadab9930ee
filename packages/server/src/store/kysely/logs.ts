import { sql, type Insertable } from 'kysely';
import type { TaskLogsTable } from '../db-types.js';
import type { LogStore } from '../ports/logs.js';
import type { LogLineRow, LogStreamName } from '../types.js';
import { chunks, INSERT_CHUNK } from './chunks.js';
import { num } from './columns.js';
import { KyselySeam, type Tx } from './seam.js';

/** Task logs on Kysely. */
export class KyselyLogStore extends KyselySeam implements LogStore {
  async appendLogs(lines: LogLineRow[]): Promise<void> {
    if (lines.length === 0) return;
    const parts = chunks(lines.map(toInsertable), INSERT_CHUNK);
    if (parts.length === 1) {
      await insertLogChunk(this.db, parts[0]!);
      return;
    }
    await this.writeTx(async (tx) => {
      for (const part of parts) await insertLogChunk(tx, part);
    });
  }

  async appendLogsIfNotSuperseded(
    fence: { task_instance_id: string; try_number: number; dispatch_gen: number },
    lines: LogLineRow[],
    note?: LogLineRow,
  ): Promise<boolean> {
    return this.writeTx(async (tx) => {
      // The fence and the write in one transaction: on SQLite the write lock is held from the
      // read (begin immediate), on PostgreSQL the row's share lock makes a concurrent retry or
      // requeue of this task instance wait for the lines (or this push see its result).
      let q = tx
        .selectFrom('task_instances')
        .select(['try_number', 'dispatch_gen'])
        .where('id', '=', fence.task_instance_id);
      if (this.dialect === 'postgres') q = q.forShare();
      const ti = await q.executeTakeFirst();
      if (ti?.try_number !== fence.try_number || Number(ti.dispatch_gen) !== fence.dispatch_gen) {
        return false;
      }
      for (const part of chunks(lines.map(toInsertable), INSERT_CHUNK)) {
        await insertLogChunk(tx, part);
      }
      if (note) await putLogLineOn(tx, note);
      return true;
    });
  }

  async readLogs(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    after_line: number,
    limit: number,
    map_index = -1,
  ): Promise<LogLineRow[]> {
    if (limit <= 0) return [];
    const rows = await this.db
      .selectFrom('task_logs')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('map_index', '=', map_index)
      .where('try_number', '=', try_number)
      .where('line_number', '>', after_line)
      .orderBy('line_number')
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      tenant_id: r.tenant_id,
      dag_run_id: r.dag_run_id,
      task_id: r.task_id,
      map_index: Number(r.map_index),
      try_number: r.try_number,
      line_number: r.line_number,
      time: num(r.time),
      stream: r.stream as LogStreamName,
      message: r.message,
    }));
  }

  async putLogLine(l: LogLineRow): Promise<void> {
    await putLogLineOn(this.db, l);
  }

  async logBytes(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    except_line: number,
    map_index = -1,
  ): Promise<number> {
    const bytes =
      this.dialect === 'postgres'
        ? sql<string | number | null>`sum(octet_length(message))`
        : sql<string | number | null>`sum(length(cast(message as blob)))`;
    const row = await this.db
      .selectFrom('task_logs')
      .select(bytes.as('bytes'))
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('map_index', '=', map_index)
      .where('try_number', '=', try_number)
      .where('line_number', '<>', except_line)
      .executeTakeFirst();
    return Number(row?.bytes ?? 0);
  }
}

function toInsertable(l: LogLineRow): Insertable<TaskLogsTable> {
  return {
    tenant_id: l.tenant_id,
    dag_run_id: l.dag_run_id,
    task_id: l.task_id,
    map_index: l.map_index ?? -1,
    try_number: l.try_number,
    line_number: l.line_number,
    time: l.time,
    stream: l.stream,
    message: l.message,
  };
}

/** Idempotent: a line already stored (same attempt and line_number) is ignored. */
async function insertLogChunk(db: Tx, chunk: Insertable<TaskLogsTable>[]): Promise<void> {
  await db
    .insertInto('task_logs')
    .values(chunk)
    .onConflict((oc) =>
      oc.columns(['dag_run_id', 'task_id', 'map_index', 'try_number', 'line_number']).doNothing(),
    )
    .execute();
}

/** Inserts the line or replaces the message and time of the one stored at its line_number. */
async function putLogLineOn(db: Tx, l: LogLineRow): Promise<void> {
  await db
    .insertInto('task_logs')
    .values(toInsertable(l))
    .onConflict((oc) =>
      oc
        .columns(['dag_run_id', 'task_id', 'map_index', 'try_number', 'line_number'])
        .doUpdateSet({ message: l.message, time: l.time, stream: l.stream }),
    )
    .execute();
}
