import { TRIGGER_RULES, type TriggerRule } from '../dag/spec.js';
import { DagError } from '../errors/leoflow-error.js';
import type { TaskInstanceState } from '../state/task-state.js';
import { isTerminal } from '../state/task-state.js';

/**
 * What a task whose own state is `none` should do, given its upstreams' states:
 * - `ready`: move to scheduled.
 * - `wait`: stay in none; the answer may change when an upstream moves.
 * - `skip`: move to skipped.
 * - `upstream_failed`: move to upstream_failed.
 */
export type TriggerDecision = 'ready' | 'wait' | 'skip' | 'upstream_failed';

interface UpstreamCounts {
  total: number;
  success: number;
  /** failed + upstream_failed: both mean "the work upstream did not happen". */
  failed: number;
  skipped: number;
  /** terminal = success + failed + upstream_failed + skipped */
  done: number;
}

function count(upstream: readonly TaskInstanceState[]): UpstreamCounts {
  const c: UpstreamCounts = { total: upstream.length, success: 0, failed: 0, skipped: 0, done: 0 };
  for (const s of upstream) {
    if (s === 'success') c.success++;
    else if (s === 'failed' || s === 'upstream_failed') c.failed++;
    else if (s === 'skipped') c.skipped++;
    if (isTerminal(s)) c.done++;
  }
  return c;
}

/**
 * Airflow trigger-rule semantics (with upstream-failure propagation on). Rows are checked top
 * to bottom; the first match wins. "failed" counts failed and upstream_failed alike;
 * up_for_retry / up_for_reschedule are not terminal, so a retrying upstream keeps its
 * downstream waiting.
 *
 * No upstream at all → ready, whatever the rule.
 *
 * all_success (default)
 *   any failed                               → upstream_failed
 *   any skipped                              → skip
 *   all success                              → ready
 *   otherwise                                → wait
 *   (Decided early: one failed upstream settles it even while siblings still run.)
 *
 * all_failed
 *   any success or skipped                   → skip
 *   all failed                               → ready
 *   otherwise                                → wait
 *
 * all_done
 *   all terminal                             → ready
 *   otherwise                                → wait
 *
 * one_success
 *   any success                              → ready
 *   all terminal, all skipped                → skip
 *   all terminal, none success               → upstream_failed
 *   otherwise                                → wait
 *
 * one_failed
 *   any failed                               → ready
 *   all terminal, none failed                → skip
 *   otherwise                                → wait
 *
 * Monotonic by construction: every non-wait row depends only on counts of terminal upstreams
 * (which only grow while the task itself is in none) or on "all terminal" (which stays true),
 * so once a rule answers non-wait it never answers wait again, and `ready` stays `ready`.
 */
export function evaluateTriggerRule(
  rule: TriggerRule,
  upstream: readonly TaskInstanceState[],
): TriggerDecision {
  if (upstream.length === 0) return 'ready';
  const c = count(upstream);
  const allDone = c.done === c.total;
  switch (rule) {
    case 'all_success':
      if (c.failed > 0) return 'upstream_failed';
      if (c.skipped > 0) return 'skip';
      return c.success === c.total ? 'ready' : 'wait';
    case 'all_failed':
      if (c.success > 0 || c.skipped > 0) return 'skip';
      return c.failed === c.total ? 'ready' : 'wait';
    case 'all_done':
      return allDone ? 'ready' : 'wait';
    case 'one_success':
      if (c.success > 0) return 'ready';
      if (!allDone) return 'wait';
      return c.skipped === c.total ? 'skip' : 'upstream_failed';
    case 'one_failed':
      if (c.failed > 0) return 'ready';
      return allDone ? 'skip' : 'wait';
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
