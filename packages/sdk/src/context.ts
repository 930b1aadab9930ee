import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LeoflowError } from '@leoflow/core';
import type { Env, EnvOption } from './env.js';

/** The run context the agent injects into every task (docs/agent.md). */
export interface TaskContext {
  dagId: string | null;
  runId: string | null;
  taskId: string | null;
  tryNumber: number | null;
  /** a mapped task's map index; null for a task that is not mapped */
  mapIndex: number | null;
  /** scheduled | manual | … ; null when the agent did not say */
  runType: string | null;
  /** As Airflow exports AIRFLOW_CTX_LOGICAL_DATE (isoformat, `+00:00`), or null when the run has none. */
  logicalDate: string | null;
  /** Airflow's `ds` (YYYY-MM-DD), `ds_nodash`, `ts` (isoformat), `ts_nodash`, `ts_nodash_with_tz`. */
  ds: string | null;
  dsNodash: string | null;
  ts: string | null;
  tsNodash: string | null;
  tsNodashWithTz: string | null;
  /** RFC 3339 */
  dataIntervalStart: string | null;
  dataIntervalEnd: string | null;
  /** the data interval of the DAG's latest successful run before this one (RFC 3339) */
  prevDataIntervalStartSuccess: string | null;
  prevDataIntervalEndSuccess: string | null;
  /** The run's conf (`{}` when empty). */
  conf: Record<string, unknown>;
  /** Resolved params (`{}` when empty). */
  params: Record<string, unknown>;
  xcomDir: string | null;
  taskInstanceId: string | null;
}

function str(env: Env, name: string): string | null {
  const v = env[name];
  return v === undefined || v === '' ? null : v;
}

function jsonObject(env: Env, name: string): Record<string, unknown> {
  const v = str(env, name);
  if (v === null) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    throw new LeoflowError('LF_SDK_CONTEXT_INVALID', `${name} is not valid JSON`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new LeoflowError('LF_SDK_CONTEXT_INVALID', `${name} is not a JSON object`);
  }
  return parsed as Record<string, unknown>;
}

export function taskContext(opts: EnvOption = {}): TaskContext {
  const env = opts.env ?? process.env;
  const tryText = str(env, 'AIRFLOW_CTX_TRY_NUMBER');
  const tryNumber = tryText !== null && /^[0-9]+$/.test(tryText) ? Number(tryText) : null;
  const mapText = str(env, 'LEOFLOW_MAP_INDEX');
  return {
    dagId: str(env, 'AIRFLOW_CTX_DAG_ID'),
    runId: str(env, 'LEOFLOW_RUN_ID') ?? str(env, 'AIRFLOW_CTX_DAG_RUN_ID'),
    taskId: str(env, 'AIRFLOW_CTX_TASK_ID'),
    tryNumber,
    mapIndex: mapText !== null && /^[0-9]+$/.test(mapText) ? Number(mapText) : null,
    runType: str(env, 'LEOFLOW_RUN_TYPE'),
    logicalDate: str(env, 'AIRFLOW_CTX_LOGICAL_DATE'),
    ds: str(env, 'LEOFLOW_DS'),
    dsNodash: str(env, 'LEOFLOW_DS_NODASH'),
    ts: str(env, 'LEOFLOW_TS'),
    tsNodash: str(env, 'LEOFLOW_TS_NODASH'),
    tsNodashWithTz: str(env, 'LEOFLOW_TS_NODASH_WITH_TZ'),
    dataIntervalStart: str(env, 'LEOFLOW_DATA_INTERVAL_START'),
    dataIntervalEnd: str(env, 'LEOFLOW_DATA_INTERVAL_END'),
    prevDataIntervalStartSuccess: str(env, 'LEOFLOW_PREV_DATA_INTERVAL_START_SUCCESS'),
    prevDataIntervalEndSuccess: str(env, 'LEOFLOW_PREV_DATA_INTERVAL_END_SUCCESS'),
    conf: jsonObject(env, 'LEOFLOW_RUN_CONF'),
    params: jsonObject(env, 'LEOFLOW_PARAMS'),
    xcomDir: str(env, 'LEOFLOW_XCOM_DIR'),
    taskInstanceId: str(env, 'LEOFLOW_TASK_INSTANCE_ID'),
  };
}

/** The agent's name for an upstream's XCom env var: upper-cased, every char outside A-Z0-9 → `_`. */
export function xcomEnvName(upstreamTaskId: string): string {
  return 'LEOFLOW_XCOM_' + upstreamTaskId.toUpperCase().replace(/[^A-Z0-9]/g, '_');
}

export interface PullXcomOptions extends EnvOption {
  /** Parse the value as JSON (default true). With false, the raw text is returned. */
  json?: boolean;
}

/**
 * An upstream's `return_value`: `LEOFLOW_XCOM_<UPSTREAM>` when the agent exported it, else the
 * file `$LEOFLOW_XCOM_DIR/<upstream_task_id>` (always written; large or binary values are only
 * there). The upstream must be in this task's `depends_on`.
 */
export function pullXcom(upstreamTaskId: string, opts: PullXcomOptions = {}): unknown {
  const env = opts.env ?? process.env;
  const name = xcomEnvName(upstreamTaskId);
  let raw: string | undefined = name === 'LEOFLOW_XCOM_DIR' ? undefined : env[name];
  if (raw === undefined) {
    const dir = str(env, 'LEOFLOW_XCOM_DIR');
    const safe =
      upstreamTaskId !== '' &&
      !/[/\\\0]/.test(upstreamTaskId) &&
      upstreamTaskId !== '.' &&
      upstreamTaskId !== '..';
    if (dir !== null && safe && existsSync(join(dir, upstreamTaskId))) {
      raw = readFileSync(join(dir, upstreamTaskId), 'utf8');
    }
  }
  if (raw === undefined) {
    throw new LeoflowError(
      'LF_SDK_XCOM_MISSING',
      `no XCom from upstream "${upstreamTaskId}" (${name} is not set and $LEOFLOW_XCOM_DIR/${upstreamTaskId} does not exist). ` +
        `Add \`depends_on: [${upstreamTaskId}]\` to this task in leoflow.yaml and \`do_xcom_push: true\` to the upstream.`,
      { upstream: upstreamTaskId },
    );
  }
  if (opts.json === false) return raw;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    throw new LeoflowError(
      'LF_SDK_XCOM_NOT_JSON',
      `the XCom from "${upstreamTaskId}" is not JSON; read it with { json: false }`,
      { upstream: upstreamTaskId },
    );
  }
}

export interface PushXcomOptions {
  /** Where to write; defaults to process.stdout. */
  write?: (text: string) => void;
}

/**
 * Pushes `value` as this task's XCom: writes it as one line of JSON on stdout. The run loop
 * takes the task's **last** stdout line when `do_xcom_push: true`, so call this last and print
 * nothing to stdout after it (log to stderr instead).
 */
export function pushXcom(value: unknown, opts: PushXcomOptions = {}): string {
  const text = JSON.stringify(value);
  if (text === undefined) {
    throw new LeoflowError(
      'LF_SDK_XCOM_NOT_SERIALIZABLE',
      'pushXcom: the value cannot be written as JSON (undefined, a function or a symbol)',
    );
  }
  const write = opts.write ?? ((t: string) => void process.stdout.write(t));
  write('\n' + text + '\n');
  return text;
}
