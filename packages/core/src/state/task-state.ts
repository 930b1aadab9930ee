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

/** "Active" is the liveness predicate: exactly queued and running. */
export const ACTIVE_STATES: ReadonlySet<TaskInstanceState> = new Set(['queued', 'running']);

export function isTerminal(s: TaskInstanceState): boolean {
  return TERMINAL_STATES.has(s);
}

export function isActive(s: TaskInstanceState): boolean {
  return ACTIVE_STATES.has(s);
}

export type DagRunState = 'queued' | 'running' | 'success' | 'failed';
export const DAG_RUN_STATES: readonly DagRunState[] = ['queued', 'running', 'success', 'failed'];
