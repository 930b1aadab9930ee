import { contextEnv } from '@leoflow/core';
import type { TaskSpec } from '@leoflow/protocol';
import { runContextOf } from './templates.js';

export type EnvMap = Record<string, string>;

/** The only LEOFLOW_* names the task may inherit from the agent's own environment. */
export const TASK_VISIBLE_AGENT_VARS: readonly string[] = [
  'LEOFLOW_STAGING_DIR',
  'LEOFLOW_TASK_INSTANCE_ID',
];

function isLeoflowName(name: string): boolean {
  return name.toUpperCase().startsWith('LEOFLOW_');
}

/**
 * Drops every agent-only variable (URL, workdir, run-as ids, interpreter paths, …) before the
 * task sees the environment. Matching is case-insensitive because a lower-cased copy reaches a
 * task just as well.
 */
export function stripAgentOnly(env: Record<string, string | undefined>): EnvMap {
  const out: EnvMap = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) continue;
    if (isLeoflowName(k) && !TASK_VISIBLE_AGENT_VARS.includes(k)) continue;
    out[k] = v;
  }
  return out;
}

/** `LEOFLOW_XCOM_<UPSTREAM>`: upper-cased, anything outside [A-Z0-9] becomes `_`. */
export function xcomEnvName(upstreamTaskId: string): string {
  return `LEOFLOW_XCOM_${upstreamTaskId.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

export const variableEnvName = (key: string): string => `AIRFLOW_VAR_${key.toUpperCase()}`;
export const connectionEnvName = (connId: string): string => `AIRFLOW_CONN_${connId.toUpperCase()}`;

export interface TaskEnvInputs {
  /** The agent's own process.env. */
  agentEnv: Record<string, string | undefined>;
  spec: Pick<
    TaskSpec,
    | 'env'
    | 'dagId'
    | 'runId'
    | 'taskId'
    | 'tryNumber'
    | 'logicalDate'
    | 'dataIntervalStart'
    | 'dataIntervalEnd'
    | 'paramsJson'
    | 'confJson'
    | 'mapIndex'
  > &
    Partial<
      Pick<TaskSpec, 'runType' | 'prevDataIntervalStartSuccess' | 'prevDataIntervalEndSuccess'>
    >;
  workdir: string;
  xcomDir: string;
  /** env name → value, already filtered to exportable upstream XComs. */
  xcomEnv: EnvMap;
  variables: Record<string, string> | undefined;
  connections: Record<string, string> | undefined;
  /** where the SDK notes the secret names it reads (LEOFLOW_SECRET_READS_FILE, D5) */
  secretReadsFile?: string | undefined;
}

export interface TaskEnvResult {
  env: EnvMap;
  /** Names (never values) of entries that could not be exported, for one agent log line. */
  dropped: string[];
}

/**
 * Order matters: later layers win. Runtime context beats author env so a DAG cannot spoof its
 * own identity; secrets come last because they are what the attempt was granted.
 */
export function buildTaskEnv(inp: TaskEnvInputs): TaskEnvResult {
  const env: EnvMap = stripAgentOnly(inp.agentEnv);
  const dropped: string[] = [];
  const put = (k: string, v: string, secret = false): void => {
    // spawn() throws on NUL bytes and an '=' in a name corrupts the environ block.
    if (k === '' || k.includes('=') || k.includes('\0') || v.includes('\0')) {
      dropped.push(secret ? '(a secret entry)' : k.replace(/\0/g, '\\0'));
      return;
    }
    env[k] = v;
  };

  for (const [k, v] of Object.entries(inp.spec.env)) {
    // The server already drops these at dispatch; dropping again costs nothing.
    if (isLeoflowName(k)) continue;
    put(k, v);
  }

  put('AIRFLOW_CTX_DAG_ID', inp.spec.dagId);
  put('AIRFLOW_CTX_DAG_RUN_ID', inp.spec.runId);
  put('AIRFLOW_CTX_TASK_ID', inp.spec.taskId);
  put('AIRFLOW_CTX_TRY_NUMBER', String(inp.spec.tryNumber));
  put('LEOFLOW_RUN_ID', inp.spec.runId);
  // ds, ts, the data intervals (this run's and the previous success's), AIRFLOW_CTX_LOGICAL_DATE
  for (const [k, v] of Object.entries(contextEnv(runContextOf(inp.spec)))) put(k, v);
  // A mapped task's map index (its arguments are in the spec's env already).
  if (inp.spec.mapIndex !== undefined) put('LEOFLOW_MAP_INDEX', String(inp.spec.mapIndex));
  put('LEOFLOW_RUN_CONF', inp.spec.confJson || '{}');
  put('LEOFLOW_PARAMS', inp.spec.paramsJson || '{}');
  put('LEOFLOW_XCOM_DIR', inp.xcomDir);
  if (inp.secretReadsFile) put('LEOFLOW_SECRET_READS_FILE', inp.secretReadsFile);
  for (const [k, v] of Object.entries(inp.xcomEnv)) put(k, v);
  put('HOME', inp.workdir);

  for (const [k, v] of Object.entries(inp.variables ?? {})) put(variableEnvName(k), v, true);
  for (const [k, v] of Object.entries(inp.connections ?? {})) put(connectionEnvName(k), v, true);

  return { env, dropped };
}
