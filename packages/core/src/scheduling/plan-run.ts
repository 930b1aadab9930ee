import type { DagSpec, TaskSpecDef } from '../dag/spec.js';
import { LeoflowError, DagError } from '../errors/leoflow-error.js';
import type { TaskInstanceState } from '../state/task-state.js';
import { isTerminal } from '../state/task-state.js';
import {
  countUpstream,
  decideSetupConstraint,
  decideTriggerRule,
  type TriggerDecision,
  type UpstreamInstance,
} from './trigger-rules.js';

export interface RunPlan {
  /** none → scheduled */
  schedule: string[];
  /** none → skipped */
  skip: string[];
  /** none → upstream_failed */
  upstreamFailed: string[];
  /** mapped tasks whose trigger rule is met: expand them (one instance per element) */
  expand: string[];
}

export type RunOutcome = 'running' | 'success' | 'failed';

/**
 * The states of a run's task instances by task id: one state for an unmapped task (or a mapped
 * one not yet expanded), or the list of its map indexes' states once expanded. A spec task that is
 * absent counts as `none` (a cleared run rebound to a newer DAG version may have gained tasks).
 */
export type RunStates = ReadonlyMap<string, TaskInstanceState | readonly TaskInstanceState[]>;

export interface PlanOptions {
  /**
   * Tasks a finished branch or short-circuit upstream decided to skip (its recorded decision):
   * skipped whatever their trigger rule, as Airflow's skip_all_except / NotPreviouslySkippedDep do.
   */
  skippedByDecision?: ReadonlySet<string>;
}

export interface Graph {
  byId: ReadonlyMap<string, TaskSpecDef>;
  /** task id → ids that list it in depends_on, in spec order */
  downstream: ReadonlyMap<string, readonly string[]>;
  /** every task id, upstreams before downstreams; ties keep spec order */
  topo: readonly string[];
  /** task id → spec index */
  index: ReadonlyMap<string, number>;
  /**
   * Setup/teardown facts, computed only for DAGs that have setups: per task, its relevant setups
   * that are not direct upstreams (Airflow's setup constraint), and per teardown the tasks in its
   * scope (indirect upstreams downstream of one of its setups).
   */
  indirectSetups: ReadonlyMap<string, readonly string[]>;
  teardownScope: ReadonlyMap<string, readonly string[]>;
  /** tasks whose end decides the run's state (Airflow's effective leaves) */
  leaves: ReadonlySet<string>;
}

function invalidDag(spec: DagSpec, reason: string, message: string, details = {}): LeoflowError {
  return new DagError('LF_DAG_INVALID', `DAG '${spec.dag_id}': ${message}`, {
    dag_id: spec.dag_id,
    reason,
    ...details,
  });
}

/**
 * The graph of a spec, built once per spec object: the scheduler asks for it every tick for every
 * active run, and a DAG version's spec never changes (the spec cache hands out one object).
 */
const graphs = new WeakMap<DagSpec, Graph>();

export function dagGraph(spec: DagSpec): Graph {
  let g = graphs.get(spec);
  if (g === undefined) {
    g = buildGraph(spec);
    graphs.set(spec, g);
  }
  return g;
}

/**
 * Validation of the spec belongs to dag/, but a scheduler that trusted a corrupt spec would
 * leave tasks waiting forever on an upstream that can never move, so the structural facts the
 * plan depends on are checked again here and fail loudly.
 */
function buildGraph(spec: DagSpec): Graph {
  const byId = new Map<string, TaskSpecDef>();
  const index = new Map<string, number>();
  spec.tasks.forEach((t, i) => {
    if (byId.has(t.task_id)) {
      throw invalidDag(
        spec,
        'duplicate_task',
        `task id '${t.task_id}' appears more than once; give every task a unique task_id.`,
        { task_id: t.task_id },
      );
    }
    byId.set(t.task_id, t);
    index.set(t.task_id, i);
  });

  const downstream = new Map<string, string[]>(spec.tasks.map((t) => [t.task_id, []]));
  const indegree = new Map<string, number>();
  for (const t of spec.tasks) {
    const ups = new Set(t.depends_on);
    for (const u of ups) {
      const list = downstream.get(u);
      if (list === undefined) {
        throw invalidDag(
          spec,
          'unknown_upstream',
          `task '${t.task_id}' depends on '${u}', which is not a task of this DAG; ` +
            'fix depends_on and register the DAG again.',
          { task_id: t.task_id, upstream: u },
        );
      }
      list.push(t.task_id);
    }
    indegree.set(t.task_id, ups.size);
  }

  // Kahn's algorithm, always releasing the lowest spec index first, so the order is a pure
  // function of the spec and reads naturally (authoring order wherever dependencies allow).
  const heap = new MinHeap();
  for (const t of spec.tasks) if (indegree.get(t.task_id) === 0) heap.push(index.get(t.task_id)!);
  const topo: string[] = [];
  while (heap.size > 0) {
    const t = spec.tasks[heap.pop()]!;
    topo.push(t.task_id);
    for (const d of downstream.get(t.task_id)!) {
      const left = indegree.get(d)! - 1;
      indegree.set(d, left);
      if (left === 0) heap.push(index.get(d)!);
    }
  }
  if (topo.length !== spec.tasks.length) {
    const stuck = spec.tasks.filter((t) => indegree.get(t.task_id)! > 0).map((t) => t.task_id);
    throw invalidDag(
      spec,
      'cycle',
      `depends_on forms a cycle among: ${stuck.join(', ')}; remove one dependency to break it.`,
      { tasks: stuck },
    );
  }
  const base = { byId, downstream, topo, index };
  const { indirectSetups, teardownScope } = setupFacts(spec, base);
  return { ...base, indirectSetups, teardownScope, leaves: effectiveLeaves(spec, base) };
}

type BaseGraph = Pick<Graph, 'byId' | 'downstream' | 'topo' | 'index'>;

/** Every task reachable from `from` along `next` (not including `from`). */
function reach(
  from: string,
  next: (id: string) => readonly string[],
  cache?: Map<string, ReadonlySet<string>>,
): ReadonlySet<string> {
  const hit = cache?.get(from);
  if (hit) return hit;
  const out = new Set<string>();
  const stack = [...next(from)];
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (out.has(id)) continue;
    out.add(id);
    for (const n of next(id)) if (!out.has(n)) stack.push(n);
  }
  cache?.set(from, out);
  return out;
}

/**
 * Airflow's setup/teardown relations (abstractoperator.py `get_upstreams_only_setups_and_teardowns`,
 * trigger_rule_dep.py `_evaluate_setup_constraint` and `_evaluate_teardown_scope`):
 * - a setup's teardowns are its direct downstream teardown tasks;
 * - a setup S is relevant to a task T upstream-of-which it is when S has no teardown, or one of
 *   S's teardowns is downstream of T; T (if not a teardown) waits for its relevant setups that
 *   are not its direct upstreams to succeed;
 * - a teardown's scope is its indirect upstreams that are downstream of one of its direct
 *   upstream setups: it runs only once every one of them has finished.
 */
function setupFacts(
  spec: DagSpec,
  g: BaseGraph,
): { indirectSetups: Map<string, string[]>; teardownScope: Map<string, string[]> } {
  const indirectSetups = new Map<string, string[]>();
  const teardownScope = new Map<string, string[]>();
  const setups = spec.tasks.filter((t) => t.setup === true);
  if (setups.length === 0) return { indirectSetups, teardownScope };
  const ups = (id: string): readonly string[] => g.byId.get(id)!.depends_on;
  const downs = (id: string): readonly string[] => g.downstream.get(id)!;
  const upCache = new Map<string, ReadonlySet<string>>();
  const downCache = new Map<string, ReadonlySet<string>>();

  // Per setup: its teardowns, and every task upstream of one of them (T is "in front of" a
  // teardown of S exactly when that teardown is downstream of T).
  const beforeTeardowns = new Map<string, ReadonlySet<string> | 'none'>();
  for (const s of setups) {
    const tds = downs(s.task_id).filter((d) => g.byId.get(d)!.teardown === true);
    if (tds.length === 0) {
      beforeTeardowns.set(s.task_id, 'none');
      continue;
    }
    const before = new Set<string>();
    for (const td of tds) for (const u of reach(td, ups, upCache)) before.add(u);
    beforeTeardowns.set(s.task_id, before);
  }

  for (const id of g.topo) {
    const task = g.byId.get(id)!;
    const upstreamAll = reach(id, ups, upCache);
    if (task.teardown === true) {
      const direct = new Set(task.depends_on);
      const mySetups = task.depends_on.filter((u) => g.byId.get(u)!.setup === true);
      const scope: string[] = [];
      if (mySetups.length > 0) {
        const afterSetups = new Set<string>();
        for (const s of mySetups) for (const d of reach(s, downs, downCache)) afterSetups.add(d);
        for (const u of g.topo) {
          if (upstreamAll.has(u) && !direct.has(u) && afterSetups.has(u)) scope.push(u);
        }
      }
      if (scope.length > 0) teardownScope.set(id, scope);
      continue;
    }
    const direct = new Set(task.depends_on);
    const relevant: string[] = [];
    for (const s of setups) {
      if (!upstreamAll.has(s.task_id) || direct.has(s.task_id)) continue;
      const before = beforeTeardowns.get(s.task_id)!;
      if (before === 'none' || before.has(id)) relevant.push(s.task_id);
    }
    if (relevant.length > 0) indirectSetups.set(id, relevant);
  }
  return { indirectSetups, teardownScope };
}

/**
 * Airflow's effective leaves (dagrun.py `_tis_for_dagrun_state`): a teardown is ignorable unless
 * it sets on_failure_fail_dagrun; a task is a leaf when every task downstream of it is an
 * ignorable teardown and it is not one itself. With no such task (a DAG of teardowns only), the
 * plain leaves.
 */
function effectiveLeaves(spec: DagSpec, g: BaseGraph): Set<string> {
  const ignorable = (t: TaskSpecDef): boolean =>
    t.teardown === true && t.on_failure_fail_dagrun !== true;
  const leaves = new Set<string>();
  for (const t of spec.tasks) {
    if (ignorable(t)) continue;
    if (g.downstream.get(t.task_id)!.every((d) => ignorable(g.byId.get(d)!))) leaves.add(t.task_id);
  }
  if (leaves.size === 0) {
    for (const t of spec.tasks)
      if (g.downstream.get(t.task_id)!.length === 0) leaves.add(t.task_id);
  }
  return leaves;
}

function statesOf(
  v: TaskInstanceState | readonly TaskInstanceState[] | undefined,
): readonly TaskInstanceState[] {
  if (v === undefined) return ['none'];
  return typeof v === 'string' ? [v] : v.length === 0 ? ['none'] : v;
}

/**
 * One scheduling tick for one run: which tasks still in `none` move, and where.
 *
 * Decisions cascade within the tick: tasks are visited upstream-first and each decision is
 * visible to the tasks below it, so a failure skips or fails a whole chain of downstreams in
 * one call instead of one level per tick. Only tasks in `none` are ever returned (for a mapped
 * task, its one unexpanded instance); every other state is left to the executor, the reapers or
 * the operator. A spec task absent from `states` counts as `none`. Entries of `states` that are
 * not spec tasks are ignored. Each list is in topological order (spec order where dependencies
 * allow), so applying it in order never writes a downstream before its upstream.
 *
 * For each such task, in Airflow's order: a finished branch / short-circuit upstream's decision
 * to skip it; no upstream or the `always` rule (ready); Airflow's setup constraint (not for
 * teardowns); the trigger rule over every upstream instance (a mapped upstream counts each map
 * index); for a teardown, its scope. Ready means scheduled, or expanded for a mapped task.
 */
export function planRun(spec: DagSpec, states: RunStates, opts: PlanOptions = {}): RunPlan {
  const g = dagGraph(spec);
  const effective = new Map<string, readonly TaskInstanceState[]>();
  const plan: RunPlan = { schedule: [], skip: [], upstreamFailed: [], expand: [] };
  const decided = opts.skippedByDecision;
  const setWhole = (id: string, s: TaskInstanceState): void => {
    effective.set(id, [s]);
  };
  for (const id of g.topo) {
    const own = statesOf(states.get(id));
    if (own.length !== 1 || own[0] !== 'none') {
      effective.set(id, own);
      continue;
    }
    const task = g.byId.get(id)!;
    let decision: TriggerDecision;
    if (decided?.has(id)) {
      decision = 'skip';
    } else if (task.depends_on.length === 0 || task.trigger_rule === 'always') {
      decision = 'ready';
    } else {
      decision = 'wait';
      const indirect = g.indirectSetups.get(id);
      const constraint =
        indirect === undefined
          ? 'pass'
          : decideSetupConstraint(indirect.flatMap((s) => effective.get(s)!));
      if (constraint !== 'pass') {
        decision = constraint;
      } else {
        const upstream: UpstreamInstance[] = [];
        for (const u of new Set(task.depends_on)) {
          const setup = g.byId.get(u)!.setup === true;
          for (const state of effective.get(u)!) upstream.push({ state, setup });
        }
        decision = decideTriggerRule(task.trigger_rule, countUpstream(upstream));
        const scope = task.teardown === true ? g.teardownScope.get(id) : undefined;
        if (decision === 'ready' && scope !== undefined) {
          const open = scope.some((s) => effective.get(s)!.some((st) => !isTerminal(st)));
          if (open) decision = 'wait';
        }
      }
    }
    switch (decision) {
      case 'ready':
        if (task.expand !== undefined) plan.expand.push(id);
        else plan.schedule.push(id);
        setWhole(id, 'scheduled');
        break;
      case 'skip':
        plan.skip.push(id);
        setWhole(id, 'skipped');
        break;
      case 'upstream_failed':
        plan.upstreamFailed.push(id);
        setWhole(id, 'upstream_failed');
        break;
      case 'wait':
        setWhole(id, 'none');
        break;
    }
  }
  return plan;
}

/**
 * The run's state implied by its task instances.
 *
 * `running` until every instance of every spec task is terminal (absent counts as `none`). Then
 * Airflow's rule over the effective leaves (see effectiveLeaves: a teardown's failure does not
 * count unless it sets on_failure_fail_dagrun): `failed` iff some instance of such a leaf is
 * failed or upstream_failed, otherwise `success`. So a failure absorbed by a downstream
 * `all_done` / `one_failed` task that itself succeeds does not fail the run, while a skipped leaf
 * does not fail it either. A DAG with no tasks is vacuously `success`.
 */
export function runOutcome(spec: DagSpec, states: RunStates): RunOutcome {
  const g = dagGraph(spec);
  let leafFailed = false;
  for (const id of g.topo) {
    for (const s of statesOf(states.get(id))) {
      if (!isTerminal(s)) return 'running';
      if (g.leaves.has(id) && (s === 'failed' || s === 'upstream_failed')) leafFailed = true;
    }
  }
  return leafFailed ? 'failed' : 'success';
}

/**
 * Every task transitively downstream of `taskId` (not including it), upstreams before
 * downstreams, for `clear --downstream`.
 */
export function downstreamOf(spec: DagSpec, taskId: string): string[] {
  const g = dagGraph(spec);
  if (!g.byId.has(taskId)) throw taskNotFound(spec, taskId);
  const reached = reach(taskId, (id) => g.downstream.get(id)!);
  return g.topo.filter((id) => reached.has(id));
}

/**
 * What clearing `taskIds` clears (Airflow's clear with its setups and teardowns): the tasks
 * themselves, every task downstream of them when `downstream`, and for each of those its relevant
 * upstream setups (a setup with no teardown, or with a teardown downstream of the task) with
 * their teardowns — so work re-runs inside the resources its setups create, and those are torn
 * down again. In topological order.
 */
export function clearTargets(
  spec: DagSpec,
  taskIds: readonly string[],
  opts: { downstream: boolean },
): string[] {
  const g = dagGraph(spec);
  const set = new Set<string>();
  for (const id of taskIds) {
    if (!g.byId.has(id)) throw taskNotFound(spec, id);
    set.add(id);
    if (opts.downstream) for (const d of downstreamOf(spec, id)) set.add(d);
  }
  if (spec.tasks.some((t) => t.setup === true)) {
    const ups = (id: string): readonly string[] => g.byId.get(id)!.depends_on;
    const downs = (id: string): readonly string[] => g.downstream.get(id)!;
    for (const id of [...set]) {
      const downstreamTeardowns = new Set(
        [...reach(id, downs)].filter((d) => g.byId.get(d)!.teardown === true),
      );
      for (const u of reach(id, ups)) {
        const up = g.byId.get(u)!;
        if (up.setup !== true) continue;
        const tds = downs(u).filter((d) => g.byId.get(d)!.teardown === true);
        if (tds.length === 0 || tds.some((d) => downstreamTeardowns.has(d))) {
          set.add(u);
          for (const d of tds) if (d !== id) set.add(d);
        }
      }
    }
  }
  return g.topo.filter((id) => set.has(id));
}

function taskNotFound(spec: DagSpec, taskId: string): LeoflowError {
  return new LeoflowError(
    'LF_TASK_NOT_FOUND',
    `DAG '${spec.dag_id}' has no task '${taskId}'; list its tasks and pick one of them.`,
    { dag_id: spec.dag_id, task_id: taskId },
  );
}

class MinHeap {
  private readonly a: number[] = [];
  get size(): number {
    return this.a.length;
  }
  push(v: number): void {
    const a = this.a;
    a.push(v);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (a[p]! <= a[i]!) break;
      [a[p], a[i]] = [a[i]!, a[p]!];
      i = p;
    }
  }
  pop(): number {
    const a = this.a;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && a[l]! < a[m]!) m = l;
        if (r < a.length && a[r]! < a[m]!) m = r;
        if (m === i) break;
        [a[m], a[i]] = [a[i]!, a[m]!];
        i = m;
      }
    }
    return top;
  }
}

/**
 * What marking `taskIds` success or failed touches (Airflow's mark dialog): the tasks
 * themselves, every task downstream of them when `downstream`, every task upstream of them when
 * `upstream`. In topological order. Unlike clear it adds no setups or teardowns: marking runs
 * nothing, so there are no resources to re-create.
 */
export function markTargets(
  spec: DagSpec,
  taskIds: readonly string[],
  opts: { downstream: boolean; upstream: boolean },
): string[] {
  const g = dagGraph(spec);
  const set = new Set<string>();
  for (const id of taskIds) {
    if (!g.byId.has(id)) throw taskNotFound(spec, id);
    set.add(id);
    if (opts.downstream) for (const d of reach(id, (x) => g.downstream.get(x)!)) set.add(d);
    if (opts.upstream) for (const u of reach(id, (x) => g.byId.get(x)!.depends_on)) set.add(u);
  }
  return g.topo.filter((id) => set.has(id));
}
