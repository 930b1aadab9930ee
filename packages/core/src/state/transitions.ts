import { LeoflowError } from '../errors/leoflow-error.js';
import type { DagRunState, TaskInstanceState } from './task-state.js';

/**
 * Legal task-instance transitions. Everything not listed is illegal, including every
 * self-transition: a write that would not change the state is a no-op for the caller to
 * recognise, not a transition to validate.
 *
 * | from              | to                                                                  |
 * |-------------------|---------------------------------------------------------------------|
 * | none              | scheduled, skipped, upstream_failed                                 |
 * | scheduled         | queued, none (clear), skipped, upstream_failed                      |
 * | queued            | running, success, failed, skipped, up_for_retry, up_for_reschedule  |
 * | running           | success, failed, skipped, up_for_retry, up_for_reschedule           |
 * | success           | none (clear)                                                        |
 * | failed            | none (clear)                                                        |
 * | skipped           | none (clear)                                                        |
 * | upstream_failed   | none (clear)                                                        |
 * | up_for_retry      | scheduled (delay elapsed), none (clear)                             |
 * | up_for_reschedule | scheduled (poke time reached), none (clear)                         |
 *
 * Why queued accepts every outcome running accepts: the agent's "running" report and its
 * outcome report travel independently, so a task that finishes (or skips itself, or asks a
 * sensor reschedule) fast can land its outcome first. Refusing it would strand the attempt.
 *
 * Why queued/running → none is absent: clearing an active attempt would leave a live agent
 * holding credentials for a row that no longer describes it. The server ends the attempt
 * first (→ failed, or waits for its outcome) and then clears; the agent's later report then
 * carries a superseded try_number and is answered should_terminate.
 *
 * Why up_for_reschedule → none is present: an operator clear must be able to reset a run
 * whose sensor is parked waiting, exactly as it can one whose task is waiting to retry.
 *
 * Why failed → up_for_retry is absent: the retry decision (see afterFailure) is taken when
 * the failure is recorded, so a failing attempt goes straight to up_for_retry or failed.
 */
const TASK_TRANSITIONS: Readonly<Record<TaskInstanceState, readonly TaskInstanceState[]>> = {
  none: ['scheduled', 'skipped', 'upstream_failed'],
  scheduled: ['queued', 'none', 'skipped', 'upstream_failed'],
  queued: ['running', 'success', 'failed', 'skipped', 'up_for_retry', 'up_for_reschedule'],
  running: ['success', 'failed', 'skipped', 'up_for_retry', 'up_for_reschedule'],
  success: ['none'],
  failed: ['none'],
  skipped: ['none'],
  upstream_failed: ['none'],
  up_for_retry: ['scheduled', 'none'],
  up_for_reschedule: ['scheduled', 'none'],
};

/**
 * Legal dag-run transitions.
 *
 * | from    | to                        |
 * |---------|---------------------------|
 * | queued  | running, failed           |
 * | running | success, failed           |
 * | success | queued (clear / rerun)    |
 * | failed  | queued (clear / rerun)    |
 */
const RUN_TRANSITIONS: Readonly<Record<DagRunState, readonly DagRunState[]>> = {
  queued: ['running', 'failed'],
  running: ['success', 'failed'],
  success: ['queued'],
  failed: ['queued'],
};

export function canTransition(from: TaskInstanceState, to: TaskInstanceState): boolean {
  // Own-property check: a state string that is not a TaskInstanceState (bad DB row, bad
  // JSON) must read as illegal, never as Object.prototype's members.
  if (!Object.prototype.hasOwnProperty.call(TASK_TRANSITIONS, from)) return false;
  return TASK_TRANSITIONS[from].includes(to);
}

export function assertTransition(from: TaskInstanceState, to: TaskInstanceState): void {
  if (!canTransition(from, to)) {
    throw new LeoflowError(
      'LF_ILLEGAL_TRANSITION',
      `A task instance cannot move from '${from}' to '${to}'. ` +
        `Legal next states from '${from}': ${describeTargets(TASK_TRANSITIONS, from)}. ` +
        'Re-read the task instance and decide again from its current state.',
      { from, to, kind: 'task_instance' },
    );
  }
}

export function canTransitionRun(from: DagRunState, to: DagRunState): boolean {
  if (!Object.prototype.hasOwnProperty.call(RUN_TRANSITIONS, from)) return false;
  return RUN_TRANSITIONS[from].includes(to);
}

export function assertRunTransition(from: DagRunState, to: DagRunState): void {
  if (!canTransitionRun(from, to)) {
    throw new LeoflowError(
      'LF_ILLEGAL_TRANSITION',
      `A dag run cannot move from '${from}' to '${to}'. ` +
        `Legal next states from '${from}': ${describeTargets(RUN_TRANSITIONS, from)}. ` +
        'Re-read the dag run and decide again from its current state.',
      { from, to, kind: 'dag_run' },
    );
  }
}

/** The legal next states of a task instance, in table order. */
export function legalNextStates(from: TaskInstanceState): readonly TaskInstanceState[] {
  return Object.prototype.hasOwnProperty.call(TASK_TRANSITIONS, from) ? TASK_TRANSITIONS[from] : [];
}

function describeTargets<S extends string>(
  table: Readonly<Record<S, readonly S[]>>,
  from: S,
): string {
  const targets = Object.prototype.hasOwnProperty.call(table, from) ? table[from] : [];
  return targets.length === 0 ? '(none)' : targets.join(', ');
}
