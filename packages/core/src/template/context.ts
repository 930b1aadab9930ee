// the URI parser alone (not the connections index): the agent's bundle carries only what it uses
import { parseConnectionUri } from '../connections/uri.js';

/**
 * Airflow's template context, computed from what the agent knows of a run: the same values are
 * exported to the task as environment variables (contextEnv) and are the names templates read
 * (templateScope). Pure: no clock, no I/O.
 */

/** What a task attempt knows about its run (from the TaskSpec message). */
export interface RunContextInput {
  dagId: string;
  runId: string;
  taskId: string;
  tryNumber: number;
  mapIndex?: number | undefined;
  runType: string;
  /** RFC 3339, '' or null when the run has none */
  logicalDate: string | null;
  dataIntervalStart: string | null;
  dataIntervalEnd: string | null;
  /** the data interval of the DAG's latest successful run before this one; null when none */
  prevDataIntervalStartSuccess: string | null;
  prevDataIntervalEndSuccess: string | null;
  conf: Record<string, unknown>;
  params: Record<string, unknown>;
}

/** The date-shaped values, as Airflow renders them (UTC); null where the run has no date. */
export interface DateValues {
  ds: string | null;
  ds_nodash: string | null;
  ts: string | null;
  ts_nodash: string | null;
  ts_nodash_with_tz: string | null;
}

function pad(n: number, w = 2): string {
  return String(n).padStart(w, '0');
}

function parse(iso: string | null): Date | null {
  if (iso === null || iso === '') return null;
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** Python's `datetime.isoformat(sep)` of an aware UTC datetime: microseconds only when non-zero. */
export function pyIsoformat(d: Date, sep = 'T'): string {
  const base =
    `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}` +
    `${sep}${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
  const ms = d.getUTCMilliseconds();
  return `${base}${ms === 0 ? '' : `.${pad(ms, 3)}000`}+00:00`;
}

/** A date-time as `str()` of Airflow's (pendulum) datetime renders it: `2026-12-07 00:00:00+00:00`. */
export function airflowDateText(iso: string | null): string | null {
  const d = parse(iso);
  return d === null ? null : pyIsoformat(d, ' ');
}

export function dateValues(logicalDate: string | null): DateValues {
  const d = parse(logicalDate);
  if (d === null)
    return { ds: null, ds_nodash: null, ts: null, ts_nodash: null, ts_nodash_with_tz: null };
  const ds = `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
  const ts = pyIsoformat(d);
  return {
    ds,
    ds_nodash: ds.replace(/-/g, ''),
    ts,
    ts_nodash: `${ds.replace(/-/g, '')}T${pad(d.getUTCHours())}${pad(d.getUTCMinutes())}${pad(d.getUTCSeconds())}`,
    ts_nodash_with_tz: ts.replace(/[-:]/g, ''),
  };
}

/**
 * The environment names of the context beyond Airflow's own `AIRFLOW_CTX_*` (Airflow exports
 * only DAG_ID, TASK_ID, LOGICAL_DATE, TRY_NUMBER, DAG_RUN_ID, DAG_OWNER, DAG_EMAIL): Leoflow's
 * names for the rest. docs/agent.md lists them; both SDKs read them.
 */
export const CONTEXT_ENV = {
  ds: 'LEOFLOW_DS',
  ds_nodash: 'LEOFLOW_DS_NODASH',
  ts: 'LEOFLOW_TS',
  ts_nodash: 'LEOFLOW_TS_NODASH',
  ts_nodash_with_tz: 'LEOFLOW_TS_NODASH_WITH_TZ',
  data_interval_start: 'LEOFLOW_DATA_INTERVAL_START',
  data_interval_end: 'LEOFLOW_DATA_INTERVAL_END',
  prev_data_interval_start_success: 'LEOFLOW_PREV_DATA_INTERVAL_START_SUCCESS',
  prev_data_interval_end_success: 'LEOFLOW_PREV_DATA_INTERVAL_END_SUCCESS',
  run_type: 'LEOFLOW_RUN_TYPE',
} as const;

/**
 * The context's environment variables (only those with a value). The agent layers them over
 * the author's env; AIRFLOW_CTX_LOGICAL_DATE is the logical date as Airflow exports it
 * (`isoformat()`, `+00:00`), and the data-interval values keep RFC 3339 as before.
 */
export function contextEnv(inp: RunContextInput): Record<string, string> {
  const out: Record<string, string> = {};
  const dates = dateValues(inp.logicalDate);
  const logical = parse(inp.logicalDate);
  if (logical !== null) out.AIRFLOW_CTX_LOGICAL_DATE = pyIsoformat(logical);
  for (const k of ['ds', 'ds_nodash', 'ts', 'ts_nodash', 'ts_nodash_with_tz'] as const) {
    const v = dates[k];
    if (v !== null) out[CONTEXT_ENV[k]] = v;
  }
  const put = (name: string, v: string | null): void => {
    if (v !== null && v !== '') out[name] = v;
  };
  put(CONTEXT_ENV.data_interval_start, inp.dataIntervalStart);
  put(CONTEXT_ENV.data_interval_end, inp.dataIntervalEnd);
  put(CONTEXT_ENV.prev_data_interval_start_success, inp.prevDataIntervalStartSuccess);
  put(CONTEXT_ENV.prev_data_interval_end_success, inp.prevDataIntervalEndSuccess);
  put(CONTEXT_ENV.run_type, inp.runType);
  return out;
}

/** The top-level names a template may read (docs/authoring.md, "Templates"). */
export const TEMPLATE_NAMES = [
  'ds',
  'ds_nodash',
  'ts',
  'ts_nodash',
  'ts_nodash_with_tz',
  'logical_date',
  'data_interval_start',
  'data_interval_end',
  'prev_data_interval_start_success',
  'prev_data_interval_end_success',
  'params',
  'dag_run',
  'run_id',
  'dag',
  'task',
  'ti',
  'task_instance',
  'var',
  'conn',
] as const;

/** Airflow names that exist there but not here, each with what to use instead. */
export const UNSUPPORTED_TEMPLATE_NAMES: Record<string, string> = {
  execution_date: 'Airflow 3 removed execution_date; use logical_date (or ds / ts)',
  next_ds: 'Airflow 3 removed next_ds; use data_interval_end',
  prev_ds: 'Airflow 3 removed prev_ds; use prev_data_interval_start_success',
  tomorrow_ds: 'Airflow 3 removed tomorrow_ds; use ds | ds_add(1)',
  yesterday_ds: 'Airflow 3 removed yesterday_ds; use ds | ds_add(-1)',
  macros: 'only macros.ds_add(…) and macros.ds_format(…) are supported',
  inlets: 'assets are not in the template context',
  outlets: 'assets are not in the template context',
  triggering_asset_events: 'assets are not in the template context',
  prev_start_date_success: 'not in the template context; use prev_data_interval_start_success',
  prev_end_date_success: 'not in the template context; use prev_data_interval_end_success',
  task_instance_key_str:
    'not in the template context; write {{ dag.dag_id }}__{{ task.task_id }}__{{ ds_nodash }}',
  conf: "Airflow's configuration is not readable from templates; the run's conf is dag_run.conf",
};

/** A connection as templates see it (Airflow's Connection attributes). */
export interface TemplateConnection {
  conn_id: string;
  conn_type: string | null;
  host: string | null;
  schema: string | null;
  login: string | null;
  password: string | null;
  port: number | null;
  extra: string | null;
  extra_dejson: Record<string, unknown>;
}

/** The names under `conn.<id>.` templates may read. */
export const CONNECTION_ATTRIBUTES = [
  'conn_id',
  'conn_type',
  'host',
  'schema',
  'login',
  'password',
  'port',
  'extra',
  'extra_dejson',
] as const;

/**
 * A delivered connection (the Airflow URI the server's codec wrote) as templates see it;
 * undefined when it cannot be read, which leaves `conn.<id>` a not-delivered name.
 */
export function templateConnectionFromUri(
  connId: string,
  uri: string,
): TemplateConnection | undefined {
  try {
    const c = parseConnectionUri(uri);
    return {
      conn_id: connId,
      conn_type: c.conn_type,
      host: c.host,
      schema: c.schema,
      login: c.login,
      password: c.password,
      port: c.port,
      extra: c.extra === null ? null : JSON.stringify(c.extra),
      extra_dejson: c.extra ?? {},
    };
  } catch {
    return undefined;
  }
}

/** What `{{ … }}` resolves names against; built by the agent for one attempt. */
export interface TemplateScope {
  values: Record<string, unknown>;
  /** variable key → value (delivered: declared and granted) */
  variables: Record<string, string>;
  /** conn id → connection (delivered: declared and granted) */
  connections: Record<string, TemplateConnection>;
}

export function templateScope(
  inp: RunContextInput,
  variables: Record<string, string>,
  connections: Record<string, TemplateConnection>,
): TemplateScope {
  const dates = dateValues(inp.logicalDate);
  const text = (iso: string | null): string | null => airflowDateText(iso);
  const logical = text(inp.logicalDate);
  const values: Record<string, unknown> = {
    run_id: inp.runId,
    params: inp.params,
    dag_run: {
      dag_id: inp.dagId,
      run_id: inp.runId,
      run_type: inp.runType,
      conf: inp.conf,
      logical_date: logical,
      data_interval_start: text(inp.dataIntervalStart),
      data_interval_end: text(inp.dataIntervalEnd),
    },
    dag: { dag_id: inp.dagId },
    task: { task_id: inp.taskId },
  };
  const ti = {
    dag_id: inp.dagId,
    task_id: inp.taskId,
    run_id: inp.runId,
    try_number: inp.tryNumber,
    map_index: inp.mapIndex ?? -1,
  };
  values.ti = ti;
  values.task_instance = ti;
  // Like Airflow 3: the date-shaped names exist only when the run has a logical date; reading
  // one otherwise is an undefined name (a task error), unless `| default(…)` gives a value.
  if (logical !== null) {
    Object.assign(values, dates, {
      logical_date: logical,
      data_interval_start: text(inp.dataIntervalStart),
      data_interval_end: text(inp.dataIntervalEnd),
      prev_data_interval_start_success: text(inp.prevDataIntervalStartSuccess),
      prev_data_interval_end_success: text(inp.prevDataIntervalEndSuccess),
    });
  }
  return { values, variables, connections };
}
