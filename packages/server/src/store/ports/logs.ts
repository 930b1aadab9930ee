import type { LogLineRow } from '../types.js';

/** Task log lines, per attempt and line number. */
export interface LogStore {
  /** Idempotent: a line already stored (same attempt and line_number) is ignored. */
  appendLogs(lines: LogLineRow[]): Promise<void>;
  readLogs(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    after_line: number,
    limit: number,
  ): Promise<LogLineRow[]>;
  /** Inserts the line or replaces the message and time of the one stored at its line_number. */
  putLogLine(line: LogLineRow): Promise<void>;
  /** UTF-8 bytes of the attempt's stored messages, not counting the line at `except_line`. */
  logBytes(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    except_line: number,
  ): Promise<number>;
}
