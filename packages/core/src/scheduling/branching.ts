import type { DagSpec } from '../dag/spec.js';
import { dagGraph } from './plan-run.js';

/**
 * A finished branch or short-circuit task's decision, recorded on its task instance when it
 * succeeds: `skipped` are the tasks the scheduler skips whatever their trigger rule (their skips
 * then propagate by the trigger rules); `followed` are the direct downstream tasks left to run.
 */
export interface BranchDecision {
  followed: string[];
  skipped: string[];
}

export type BranchOutcome =
  | { ok: true; decision: BranchDecision }
  | { ok: false; code: 'LF_BRANCH_INVALID' | 'LF_BRANCH_NO_RESULT'; message: string };

/**
 * The ids a branch's return value names (its last stdout line): a JSON string or list of strings,
 * JSON `null` (follow nothing: every direct downstream is skipped, as when Airflow's callable
 * returns None), or plain text, read as one task id. Undefined = no usable value.
 */
function parseBranchIds(text: string): string[] | { error: string } {
  const t = text.trim();
  if (t === '') return { error: 'the return value is empty' };
  let v: unknown;
  try {
    v = JSON.parse(t);
  } catch {
    return [t];
  }
  if (v === null) return [];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v;
  return {
    error:
      'the return value must name task ids: a task id, a JSON list of task ids, or null, not ' +
      (Array.isArray(v) ? 'a list holding something other than strings' : `a JSON ${typeof v}`),
  };
}

/**
 * Which direct downstream tasks a branch follows, as Airflow's BranchMixIn / skip_all_except do:
 * a task group id stands for the group's root tasks; every id must be a task (or group) of the
 * DAG; a downstream task that is itself downstream of a followed task is followed too (so a
 * "join" directly downstream of the branch still runs); every other direct downstream is skipped.
 */
export function branchDecision(
  spec: DagSpec,
  taskId: string,
  chosen: readonly string[],
): BranchOutcome {
  const g = dagGraph(spec);
  const groups = new Set((spec.task_groups ?? []).map((x) => x.group_id));
  const ids = new Set<string>();
  const unknown: string[] = [];
  for (const id of chosen) {
    if (g.byId.has(id)) ids.add(id);
    else if (groups.has(id)) for (const r of groupRoots(spec, id)) ids.add(r);
    else unknown.push(id);
  }
  if (unknown.length > 0) {
    return {
      ok: false,
      code: 'LF_BRANCH_INVALID',
      message: `task "${taskId}" branched to ${unknown.map((u) => JSON.stringify(u)).join(', ')}, which ${unknown.length === 1 ? 'is' : 'are'} not a task or task group of DAG "${spec.dag_id}"; return one of its downstream task ids: ${(g.downstream.get(taskId) ?? []).join(', ') || '(none)'}`,
    };
  }
  const follow = new Set(ids);
  for (const id of ids) for (const d of flatDownstream(spec, id)) follow.add(d);
  const direct = g.downstream.get(taskId) ?? [];
  return {
    ok: true,
    decision: {
      followed: direct.filter((d) => follow.has(d)),
      skipped: direct.filter((d) => !follow.has(d)),
    },
  };
}

/** A branch task's decision from its return value (undefined: it pushed none). */
export function branchFromReturnValue(
  spec: DagSpec,
  taskId: string,
  value: string | undefined,
): BranchOutcome {
  if (value === undefined) {
    return {
      ok: false,
      code: 'LF_BRANCH_NO_RESULT',
      message: `branch task "${taskId}" printed no return value: print the task id(s) to follow as its last stdout line (a JSON list for several, null for none)`,
    };
  }
  const ids = parseBranchIds(value);
  if (!Array.isArray(ids)) {
    return {
      ok: false,
      code: 'LF_BRANCH_INVALID',
      message: `branch task "${taskId}": ${ids.error}`,
    };
  }
  return branchDecision(spec, taskId, ids);
}

/**
 * A branch task's decision from its exit code (`branch.exit_codes`): undefined when the task is
 * not an exit-code branch or the code is not mapped (the attempt then succeeds or fails as usual).
 */
export function branchFromExitCode(
  spec: DagSpec,
  taskId: string,
  exitCode: number,
): BranchOutcome | undefined {
  const task = dagGraph(spec).byId.get(taskId);
  if (task?.branch?.mode !== 'exit_code') return undefined;
  const ids = Object.prototype.hasOwnProperty.call(task.branch.exit_codes, String(exitCode))
    ? task.branch.exit_codes[String(exitCode)]
    : undefined;
  if (ids === undefined) return undefined;
  return branchDecision(spec, taskId, ids);
}

/** Python's truthiness of a JSON value; text that is not JSON is a non-empty string. */
function truthy(text: string): boolean {
  const t = text.trim();
  let v: unknown;
  try {
    v = JSON.parse(t);
  } catch {
    return t !== '';
  }
  if (v === null || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

/**
 * A short-circuit task's decision (Airflow's ShortCircuitOperator): a truthy return value lets
 * every downstream task run; a falsy one (false, 0, "", null, [], {}) skips every downstream task
 * (ignore_downstream_trigger_rules, the default) or the direct ones only — never a teardown.
 */
export function shortCircuitDecision(
  spec: DagSpec,
  taskId: string,
  value: string | undefined,
): BranchOutcome {
  const g = dagGraph(spec);
  const task = g.byId.get(taskId);
  const direct = g.downstream.get(taskId) ?? [];
  if (value === undefined) {
    return {
      ok: false,
      code: 'LF_BRANCH_NO_RESULT',
      message: `short-circuit task "${taskId}" printed no return value: print true to continue or false to skip its downstream tasks (as its last stdout line)`,
    };
  }
  if (truthy(value)) return { ok: true, decision: { followed: [...direct], skipped: [] } };
  const all = task?.short_circuit?.ignore_downstream_trigger_rules !== false;
  const candidates = all ? flatDownstream(spec, taskId) : direct;
  const skipped = candidates.filter((d) => g.byId.get(d)?.teardown !== true);
  const skip = new Set(skipped);
  return { ok: true, decision: { followed: direct.filter((d) => !skip.has(d)), skipped } };
}

/** Every task downstream of `taskId`, in topological order. */
function flatDownstream(spec: DagSpec, taskId: string): string[] {
  const g = dagGraph(spec);
  const out = new Set<string>();
  const stack = [...(g.downstream.get(taskId) ?? [])];
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (out.has(id)) continue;
    out.add(id);
    stack.push(...(g.downstream.get(id) ?? []));
  }
  return g.topo.filter((id) => out.has(id));
}

/** A task group's roots: its tasks (nested groups included) with no upstream inside the group. */
export function groupRoots(spec: DagSpec, groupId: string): string[] {
  const inGroup = (g: string | undefined): boolean =>
    g !== undefined && (g === groupId || g.startsWith(`${groupId}.`));
  const members = new Set(spec.tasks.filter((t) => inGroup(t.group)).map((t) => t.task_id));
  return spec.tasks
    .filter((t) => members.has(t.task_id) && !t.depends_on.some((u) => members.has(u)))
    .map((t) => t.task_id);
}

/** A task group's leaves: its tasks with no downstream inside the group. */
export function groupLeaves(spec: DagSpec, groupId: string): string[] {
  const inGroup = (g: string | undefined): boolean =>
    g !== undefined && (g === groupId || g.startsWith(`${groupId}.`));
  const members = new Set(spec.tasks.filter((t) => inGroup(t.group)).map((t) => t.task_id));
  const hasInnerDownstream = new Set<string>();
  for (const t of spec.tasks) {
    if (!members.has(t.task_id)) continue;
    for (const u of t.depends_on) if (members.has(u)) hasInnerDownstream.add(u);
  }
  return [...members].filter((id) => !hasInnerDownstream.has(id));
}
