/**
 * The compiled DAG (`dag.json`): the artifact `leoflow dags compile` writes, the API accepts,
 * and a dag_version row stores. Its JSON Schema is `@leoflow/protocol`'s dag.schema.json.
 */
export const DAG_SCHEMA_VERSION = '1.0';

import type { TaskKubernetes } from './kubernetes.js';

export type TaskType = 'bash' | 'python' | 'node';
export const TASK_TYPES: readonly TaskType[] = ['bash', 'python', 'node'];

export type TriggerRule = 'all_success' | 'all_failed' | 'all_done' | 'one_success' | 'one_failed';
export const TRIGGER_RULES: readonly TriggerRule[] = [
  'all_success',
  'all_failed',
  'all_done',
  'one_success',
  'one_failed',
];

export interface TaskDefaults {
  retries: number;
  retry_delay_seconds: number;
  /** null = no timeout */
  execution_timeout_seconds: number | null;
}

export interface TaskSpecDef {
  task_id: string;
  type: TaskType;
  /** bash: the command line; python/node: the script source (inline or read from `script:`). */
  command: string;
  depends_on: string[];
  trigger_rule: TriggerRule;
  retries: number;
  retry_delay_seconds: number;
  execution_timeout_seconds: number | null;
  env: Record<string, string>;
  /** declared Variable keys; empty = the DAG-level list applies */
  variables: string[];
  /** declared Connection ids; empty = the DAG-level list applies */
  connections: string[];
  do_xcom_push: boolean;
  /**
   * The executor that runs this task (a configured executor's name, e.g. "kubernetes"); absent =
   * the control plane's default. Absent rather than filled in, so DAGs written before the key
   * existed keep their spec hash.
   */
  executor?: string;
  /**
   * `executor: runner` only: labels a runner must carry (same values) to take this task's
   * attempts; absent = any runner of the tenant. Absent rather than empty, like `executor`.
   */
  runner_labels?: Record<string, string>;
  /** the task's Kubernetes choices within its tenant's allowlist; absent = the tenant's defaults */
  kubernetes?: TaskKubernetes;
}

export interface DagSpec {
  schema_version: typeof DAG_SCHEMA_VERSION;
  dag_id: string;
  description: string;
  owner: string;
  tags: string[];
  /**
   * 5-field cron line (single spaces), preset (@hourly @daily @weekly @monthly @yearly — aliases
   * are normalised to these), @once, or null for manual only
   */
  schedule: string | null;
  /** IANA zone name the schedule and naive dates are read in */
  schedule_timezone: string;
  /** RFC 3339 in UTC with milliseconds, e.g. 2026-01-01T00:00:00.000Z */
  start_date: string | null;
  end_date: string | null;
  catchup: boolean;
  max_active_runs: number;
  /** 0 = unlimited */
  max_active_tasks: number;
  defaults: TaskDefaults;
  params: Record<string, unknown>;
  variables: string[];
  connections: string[];
  tasks: TaskSpecDef[];
}

export const ID_PATTERN = /^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,199}$/;
