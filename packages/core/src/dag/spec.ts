/**
 * The compiled DAG (`dag.json`): the artifact `leoflow dags compile` writes, the API accepts,
 * and a dag_version row stores. Its JSON Schema is `@leoflow/protocol`'s dag.schema.json.
 */
export const DAG_SCHEMA_VERSION = '1.0';

import type { TaskKubernetes } from './kubernetes.js';

export type TaskType = 'bash' | 'python' | 'node';
export const TASK_TYPES: readonly TaskType[] = ['bash', 'python', 'node'];

/** Airflow 3's trigger rules, every one (docs/authoring.md, "Trigger rules"). */
export type TriggerRule =
  | 'all_success'
  | 'all_failed'
  | 'all_done'
  | 'all_done_min_one_success'
  | 'all_done_setup_success'
  | 'all_skipped'
  | 'one_success'
  | 'one_failed'
  | 'one_done'
  | 'none_failed'
  | 'none_failed_min_one_success'
  | 'none_skipped'
  | 'always';
export const TRIGGER_RULES: readonly TriggerRule[] = [
  'all_success',
  'all_failed',
  'all_done',
  'all_done_min_one_success',
  'all_done_setup_success',
  'all_skipped',
  'one_success',
  'one_failed',
  'one_done',
  'none_failed',
  'none_failed_min_one_success',
  'none_skipped',
  'always',
];

/**
 * A branching task (Airflow's `@task.branch` / BranchPythonOperator): which of its direct
 * downstream tasks run is named by its return value (the last stdout line: a task id, a JSON list
 * of them, or `null` for none), or by its exit code through `exit_codes`. The others are skipped,
 * and those skips propagate by the trigger rules.
 */
export type BranchSpec =
  | { mode: 'return_value' }
  | {
      mode: 'exit_code';
      /** exit code (decimal text) -> the task ids (or group ids) to follow */
      exit_codes: Record<string, string[]>;
    };

/**
 * A short-circuiting task (Airflow's ShortCircuitOperator / `@task.short_circuit`): a falsy return
 * value skips its downstream tasks — every one of them (`ignore_downstream_trigger_rules`, the
 * default), or only the direct ones, leaving the rest to their trigger rules. Teardowns are never
 * skipped by it.
 */
export interface ShortCircuitSpec {
  ignore_downstream_trigger_rules: boolean;
}

/**
 * One argument of a mapped task (Airflow's `expand`): the environment variable it sets in each
 * map index, and where its list comes from — a literal list, or the return value of an upstream
 * task (a JSON list; for a mapped upstream, the list of its indexes' return values).
 */
export type ExpandArg =
  | { env: string; values: unknown[] }
  | {
      env: string;
      /** the upstream task whose return value is the list */
      xcom: string;
    };

/** A task group (Airflow's TaskGroup), for display: tasks carry their group in `group`. */
export interface TaskGroupSpec {
  /** the full group id, parents' ids prefixed (`outer.inner`) */
  group_id: string;
  /** the enclosing group's full id; absent at the top level */
  parent?: string;
  tooltip?: string;
}

/** Airflow's [core] max_map_length default: the longest list one mapped task expands over. */
export const DEFAULT_MAX_MAP_LENGTH = 1024;
/** The ceiling an author may raise a task's max_map_length to. */
export const MAX_MAP_LENGTH_CEILING = 10_000;

export interface TaskDefaults {
  retries: number;
  retry_delay_seconds: number;
  /** null = no timeout */
  execution_timeout_seconds: number | null;
  /**
   * Exponential backoff multiplier for retries (Airflow 3: `retry_exponential_backoff`; `true` is
   * 2). Absent (or 0, or 1) = a constant delay. Absent rather than 0, so DAGs written before the
   * key existed keep their spec hash; the same holds for every optional key below.
   */
  retry_exponential_backoff?: number;
  /** the longest delay backoff may reach (Airflow: `max_retry_delay`); absent = no cap */
  max_retry_delay_seconds?: number;
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
  /** see TaskDefaults.retry_exponential_backoff; resolved per task (defaults applied) */
  retry_exponential_backoff?: number;
  /** see TaskDefaults.max_retry_delay_seconds */
  max_retry_delay_seconds?: number;
  /** a setup task (Airflow's `as_setup()` / `@setup`) */
  setup?: true;
  /**
   * A teardown task (Airflow's `as_teardown()` / `@teardown`): its setups are its direct upstream
   * setup tasks, its trigger rule is all_done_setup_success, and it runs when a setup of it ran,
   * whatever happened between.
   */
  teardown?: true;
  /** teardown only: its failure fails the run (by default a teardown's failure does not) */
  on_failure_fail_dagrun?: true;
  branch?: BranchSpec;
  short_circuit?: ShortCircuitSpec;
  /** the full id of the task group the task belongs to (its task_id is already prefixed) */
  group?: string;
  /** a mapped task: one task instance per element (of the product, for several arguments) */
  expand?: ExpandArg[];
  /** mapped tasks only: the longest list it may expand over (default DEFAULT_MAX_MAP_LENGTH) */
  max_map_length?: number;
  /**
   * The bash command or an env value holds `{{ … }}` (checked at compile time): the agent renders
   * them. Absent otherwise, so a version stored before templates existed is never rendered.
   */
  templated?: true;
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
  /** the DAG's task groups, parents before children; absent when it has none */
  task_groups?: TaskGroupSpec[];
  tasks: TaskSpecDef[];
}

export const ID_PATTERN = /^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,199}$/;
