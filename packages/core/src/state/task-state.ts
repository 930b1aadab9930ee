export type TaskInstanceState =
  | 'none'
  | 'scheduled'
  | 'queued'
  | 'running'
  | 'success'
  | 'failed'
  | 'skipped'
  | 'upstream_failed'
  | 'up_for_retry'
  | 'up_for_reschedule';

export const TASK_INSTANCE_STATES: readonly TaskInstanceState[] = [
  'none',
  'scheduled',
  'queued',
  'running',
  'success',
  'failed',
  'skipped',
  'upstream_failed',
  'up_for_retry',
  'up_for_reschedule',
];

export const TERMINAL_STATES: ReadonlySet<TaskInstanceState> = new Set([
  'success',
  'failed',
  'skipped',
  'upstream_failed',
]);

/**
 * "Active" is the liveness predicate: exactly queued and running. The one list of them, for
 * queries and compare-and-set expectations; the same two are a run's unfinished states, so it
 * serves DagRunState as well.
 */
export const ACTIVE_STATES = ['queued', 'running'] as const satisfies readonly Extract<
  TaskInstanceState,
  DagRunState
>[];
const ACTIVE_SET: ReadonlySet<TaskInstanceState> = new Set(ACTIVE_STATES);

export function isTerminal(s: TaskInstanceState): boolean {
  return TERMINAL_STATES.has(s);
}

export function isActive(s: TaskInstanceState): boolean {
  return ACTIVE_SET.has(s);
}

export type DagRunState = 'queued' | 'running' | 'success' | 'failed';
export const DAG_RUN_STATES: readonly DagRunState[] = ['queued', 'running', 'success', 'failed'];
