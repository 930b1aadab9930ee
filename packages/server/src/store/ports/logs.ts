import type { LogLineRow } from '../types.js';

/** Task log lines, per attempt and line number. */
export interface LogStore {
  /** Idempotent: a line already stored (same attempt and line_number) is ignored. */
  appendLogs(lines: LogLineRow[]): Promise<void>;
  /**
   * The PushLogs fence and its write in one transaction: appends `lines` (as appendLogs) and
   * puts `note` (as putLogLine) only while the task instance's row still holds this try and
   * dispatch generation; false, and nothing written, once a later try or generation superseded
   * it. The attempt's state is not compared (a just-finished try still ships its last lines).
   */
  appendLogsIfNotSuperseded(
    fence: { task_instance_id: string; try_number: number; dispatch_gen: number },
    lines: LogLineRow[],
    note?: LogLineRow,
  ): Promise<boolean>;
  /** One attempt's lines; map index -1 (the default) for a task that is not mapped. */
  readLogs(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    after_line: number,
    limit: number,
    map_index?: number,
  ): Promise<LogLineRow[]>;
  /** Inserts the line or replaces the message and time of the one stored at its line_number. */
  putLogLine(line: LogLineRow): Promise<void>;
  /** UTF-8 bytes of the attempt's stored messages, not counting the line at `except_line`. */
  logBytes(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    except_line: number,
    map_index?: number,
  ): Promise<number>;
}
