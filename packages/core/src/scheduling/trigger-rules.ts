import { TRIGGER_RULES, type TriggerRule } from '../dag/spec.js';
import { DagError } from '../errors/leoflow-error.js';
import type { TaskInstanceState } from '../state/task-state.js';

/**
 * What a task whose own state is `none` should do, given its upstreams' states:
 * - `ready`: move to scheduled (a mapped task: expand).
 * - `wait`: stay in none; the answer may change when an upstream moves.
 * - `skip`: move to skipped.
 * - `upstream_failed`: move to upstream_failed.
 */
export type TriggerDecision = 'ready' | 'wait' | 'skip' | 'upstream_failed';

/** One upstream task instance: its state, and whether its task is a setup task. */
export interface UpstreamInstance {
  state: TaskInstanceState;
  setup?: boolean;
}

/**
 * Airflow's upstream counts (trigger_rule_dep.py, `_UpstreamTIStates` plus the upstream and
 * upstream-setup totals). Only finished instances are counted by state; `upstream` counts every
 * instance, so `upstream - done` is what is still unfinished. Leoflow has no `removed` state.
 */
export interface UpstreamCounts {
  /** upstream task instances in all (a mapped upstream counts each map index) */
  upstream: number;
  success: number;
  skipped: number;
  failed: number;
  upstream_failed: number;
  /** finished: success + skipped + failed + upstream_failed */
  done: number;
  /** instances of setup tasks among `upstream` */
  upstream_setup: number;
  success_setup: number;
  skipped_setup: number;
}

export function countUpstream(
  upstream: readonly (TaskInstanceState | UpstreamInstance)[],
): UpstreamCounts {
  const c: UpstreamCounts = {
    upstream: upstream.length,
    success: 0,
    skipped: 0,
    failed: 0,
    upstream_failed: 0,
    done: 0,
    upstream_setup: 0,
    success_setup: 0,
    skipped_setup: 0,
  };
  for (const u of upstream) {
    const state = typeof u === 'string' ? u : u.state;
    const setup = typeof u === 'string' ? false : u.setup === true;
    if (setup) c.upstream_setup++;
    switch (state) {
      case 'success':
        c.success++;
        if (setup) c.success_setup++;
        break;
      case 'skipped':
        c.skipped++;
        if (setup) c.skipped_setup++;
        break;
      case 'failed':
        c.failed++;
        break;
      case 'upstream_failed':
        c.upstream_failed++;
        break;
      default:
        continue;
    }
    c.done++;
  }
  return c;
}

/**
 * Airflow 3's trigger rules with `flag_upstream_failed` on (what its scheduler uses), from
 * airflow/ti_deps/deps/trigger_rule_dep.py (`_evaluate_direct_relatives`): first the rule may
 * decide a new state (skipped or upstream_failed) — some rules without waiting for every
 * upstream — then, if it did not, the task is ready exactly when the rule's condition holds.
 * "Finished" is success, failed, skipped, upstream_failed; up_for_retry and up_for_reschedule are
 * not, so a retrying upstream keeps its downstream waiting.
 *
 * | rule                        | skip when                           | upstream_failed when                 | ready when                                |
 * |-----------------------------|-------------------------------------|--------------------------------------|-------------------------------------------|
 * | all_success                 | (no failure and) any skipped        | any failed / upstream_failed         | all success                               |
 * | all_failed                  | any success or skipped              | —                                    | all failed / upstream_failed              |
 * | all_done                    | —                                   | —                                    | all finished                              |
 * | all_done_min_one_success    | any skipped                         | all finished, no success             | all finished, ≥ 1 success                 |
 * | all_done_setup_success      | all finished, every setup skipped   | all finished, no setup succeeded     | all finished, ≥ 1 setup success (if any)  |
 * | all_skipped                 | any success, failed, upstream_failed| —                                    | all skipped                               |
 * | one_success                 | all finished, all skipped           | all finished, no success             | ≥ 1 success                               |
 * | one_failed                  | all finished, none failed           | —                                    | ≥ 1 failed / upstream_failed              |
 * | one_done                    | all finished, no success or failed  | —                                    | ≥ 1 success or failed                     |
 * | none_failed                 | —                                   | any failed / upstream_failed         | all success or skipped                    |
 * | none_failed_min_one_success | (no failure and) all skipped        | any failed / upstream_failed         | all success or skipped (so ≥ 1 success)   |
 * | none_skipped                | any skipped                         | —                                    | all finished, none skipped                |
 * | always                      | —                                   | —                                    | at once, whatever the upstreams           |
 *
 * No upstream at all → ready, whatever the rule. Monotonic: every skip/upstream_failed/ready row
 * depends on counts of finished upstreams (which only grow while the task waits in none) or on
 * "all finished" (which stays true), so once a rule answers something other than wait it keeps
 * answering it.
 */
export function decideTriggerRule(rule: TriggerRule, c: UpstreamCounts): TriggerDecision {
  if (c.upstream === 0) return 'ready';
  const { success, skipped, failed, upstream_failed: upFailed, done, upstream } = c;
  const allDone = done >= upstream;
  switch (rule) {
    case 'all_success':
      if (upFailed > 0 || failed > 0) return 'upstream_failed';
      if (skipped > 0) return 'skip';
      return upstream - success > 0 ? 'wait' : 'ready';
    case 'all_failed':
      if (success > 0 || skipped > 0) return 'skip';
      return upstream - failed - upFailed > 0 ? 'wait' : 'ready';
    case 'all_done':
      return allDone ? 'ready' : 'wait';
    case 'all_done_min_one_success': {
      // skipped upstreams are not "done" for this rule: any skip skips it
      const nonSkippedDone = success + failed + upFailed;
      const nonSkippedUpstream = upstream - skipped;
      if (skipped > 0) return 'skip';
      if (nonSkippedDone >= nonSkippedUpstream && success === 0) return 'upstream_failed';
      return nonSkippedDone < nonSkippedUpstream ? 'wait' : 'ready';
    }
    case 'all_done_setup_success':
      if (allDone && c.upstream_setup > 0 && c.skipped_setup >= c.upstream_setup) return 'skip';
      if (allDone && c.upstream_setup > 0 && c.success_setup === 0) return 'upstream_failed';
      return allDone ? 'ready' : 'wait';
    case 'all_skipped':
      if (success > 0 || failed > 0 || upFailed > 0) return 'skip';
      return upstream - skipped > 0 ? 'wait' : 'ready';
    case 'one_success':
      if (allDone && done === skipped) return 'skip';
      if (allDone && success <= 0) return 'upstream_failed';
      return success > 0 ? 'ready' : 'wait';
    case 'one_failed':
      if (allDone && failed === 0 && upFailed === 0) return 'skip';
      return failed > 0 || upFailed > 0 ? 'ready' : 'wait';
    case 'one_done':
      if (allDone && failed === 0 && success === 0) return 'skip';
      return success + failed > 0 ? 'ready' : 'wait';
    case 'none_failed':
      if (upFailed > 0 || failed > 0) return 'upstream_failed';
      return upstream - success - skipped > 0 ? 'wait' : 'ready';
    case 'none_failed_min_one_success':
      if (upFailed > 0 || failed > 0) return 'upstream_failed';
      if (skipped === upstream) return 'skip';
      if (allDone && success === 0) return 'upstream_failed';
      return upstream - success - skipped > 0 ? 'wait' : 'ready';
    case 'none_skipped':
      if (skipped > 0) return 'skip';
      return allDone ? 'ready' : 'wait';
    case 'always':
      return 'ready';
    default: {
      // Reachable only from unvalidated data (a hand-edited dag.json, an old row).
      const unknown: never = rule;
      throw new DagError(
        'LF_UNKNOWN_TRIGGER_RULE',
        `Unknown trigger rule '${String(unknown)}'. Use one of: ${TRIGGER_RULES.join(', ')}.`,
        { rule: unknown },
      );
    }
  }
}

/** decideTriggerRule over a list of upstream states (or instances flagged as setups). */
export function evaluateTriggerRule(
  rule: TriggerRule,
  upstream: readonly (TaskInstanceState | UpstreamInstance)[],
): TriggerDecision {
  return decideTriggerRule(rule, countUpstream(upstream));
}

/**
 * Airflow's setup constraint (trigger_rule_dep.py, `_evaluate_setup_constraint`), checked before
 * the trigger rule for every task but a teardown: the task's relevant setups that are not its
 * direct upstreams must all succeed. A failed (or upstream_failed) one makes it upstream_failed
 * and a skipped one skips it at once; otherwise it waits until every one has succeeded, and then
 * (`pass`) its trigger rule decides.
 */
export function decideSetupConstraint(
  indirectSetups: readonly TaskInstanceState[],
): TriggerDecision | 'pass' {
  let nonSuccess = 0;
  let skipped = false;
  for (const s of indirectSetups) {
    if (s === 'failed' || s === 'upstream_failed') return 'upstream_failed';
    if (s === 'skipped') skipped = true;
    if (s !== 'success') nonSuccess++;
  }
  if (skipped) return 'skip';
  return nonSuccess > 0 ? 'wait' : 'pass';
}
