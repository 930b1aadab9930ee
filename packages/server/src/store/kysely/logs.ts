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
      await insertChunk(this.db, rows);
      return;
    }
    await this.writeTx(async (tx) => {
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
    const rows = await this.db
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
    await this.db
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
    const row = await this.db
      .selectFrom('task_logs')
      .select(bytes.as('bytes'))
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('try_number', '=', try_number)
      .where('line_number', '<>', except_line)
      .executeTakeFirst();
    return Number(row?.bytes ?? 0);
  }
}
