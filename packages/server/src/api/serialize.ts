import type {
  DagImportErrorRow,
  DagRow,
  DagRunRow,
  LogLineRow,
  TaskInstanceHistoryRow,
  TaskInstanceRow,
} from '../store/types.js';

export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export function dagOut(d: DagRow) {
  return {
    dag_id: d.dag_id,
    current_version: d.current_version,
    is_paused: d.is_paused,
    is_active: d.is_active,
    source_file: d.source_file,
    created_at: iso(d.created_at),
    updated_at: iso(d.updated_at),
  };
}

export function importErrorOut(e: DagImportErrorRow) {
  return {
    file: e.file,
    dag_id: e.dag_id,
    diagnostics: e.diagnostics,
    first_seen_at: iso(e.first_seen_at),
    updated_at: iso(e.updated_at),
  };
}

export function runOut(r: DagRunRow) {
  return {
    dag_id: r.dag_id,
    run_id: r.run_id,
    dag_version: r.dag_version,
    run_type: r.run_type,
    state: r.state,
    logical_date: iso(r.logical_date),
    data_interval_start: iso(r.data_interval_start),
    data_interval_end: iso(r.data_interval_end),
    conf: r.conf,
    created_at: iso(r.created_at),
    started_at: iso(r.started_at),
    ended_at: iso(r.ended_at),
  };
}

export function taskInstanceOut(t: TaskInstanceRow) {
  return {
    task_id: t.task_id,
    map_index: t.map_index,
    map_value: t.map_value,
    decision: t.decision,
    try_number: t.try_number,
    max_tries: t.max_tries,
    state: t.state,
    queued_at: iso(t.queued_at),
    started_at: iso(t.started_at),
    ended_at: iso(t.ended_at),
    last_heartbeat_at: iso(t.last_heartbeat_at),
    retry_at: iso(t.retry_at),
    exit_code: t.exit_code,
    error_message: t.error_message,
    hostname: t.hostname,
    /** the executor holding the claim (null before the first claim) */
    executor: t.executor,
  };
}

export function historyOut(h: TaskInstanceHistoryRow) {
  return {
    task_id: h.task_id,
    map_index: h.map_index,
    try_number: h.try_number,
    state: h.state,
    started_at: iso(h.started_at),
    ended_at: iso(h.ended_at),
    exit_code: h.exit_code,
    error_message: h.error_message,
  };
}

export function logLineOut(l: LogLineRow) {
  return { line_number: l.line_number, time: iso(l.time), stream: l.stream, message: l.message };
}
