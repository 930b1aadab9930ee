import type { DagSpec, TaskSpecDef } from '../dag/spec.js';
import { LeoflowError, DagError } from '../errors/leoflow-error.js';
import type { TaskInstanceState } from '../state/task-state.js';
import { isTerminal } from '../state/task-state.js';
import { evaluateTriggerRule } from './trigger-rules.js';

export interface RunPlan {
  /** none → scheduled */
  schedule: string[];
  /** none → skipped */
  skip: string[];
  /** none → upstream_failed */
  upstreamFailed: string[];
}

export type RunOutcome = 'running' | 'success' | 'failed';

interface Graph {
  byId: ReadonlyMap<string, TaskSpecDef>;
  /** task id → ids that list it in depends_on, in spec order */
  downstream: ReadonlyMap<string, readonly string[]>;
  /** every task id, upstreams before downstreams; ties keep spec order */
  topo: readonly string[];
}

function invalidDag(spec: DagSpec, reason: string, message: string, details = {}): LeoflowError {
  return new DagError('LF_DAG_INVALID', `DAG '${spec.dag_id}': ${message}`, {
    dag_id: spec.dag_id,
    reason,
    ...details,
  });
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
  return { byId, downstream, topo };
}

/**
 * One scheduling tick for one run: which tasks still in `none` move, and where.
 *
 * Decisions cascade within the tick: tasks are visited upstream-first and each decision is
 * visible to the tasks below it, so a failure skips or fails a whole chain of downstreams in
 * one call instead of one level per tick. Only `none` tasks are ever returned; every other
 * state is left to the executor, the reapers or the operator. A spec task absent from
 * `states` counts as `none` (a cleared run rebound to a newer DAG version may have gained
 * tasks). Entries of `states` that are not spec tasks are ignored. Each list is in
 * topological order (spec order where dependencies allow), so applying it in order never
 * writes a downstream before its upstream.
 */
export function planRun(spec: DagSpec, states: ReadonlyMap<string, TaskInstanceState>): RunPlan {
  const g = buildGraph(spec);
  const effective = new Map<string, TaskInstanceState>();
  const plan: RunPlan = { schedule: [], skip: [], upstreamFailed: [] };
  for (const id of g.topo) {
    const own = states.get(id) ?? 'none';
    if (own !== 'none') {
      effective.set(id, own);
      continue;
    }
    const task = g.byId.get(id)!;
    const upstream = task.depends_on.map((u) => effective.get(u)!);
    switch (evaluateTriggerRule(task.trigger_rule, upstream)) {
      case 'ready':
        plan.schedule.push(id);
        effective.set(id, 'scheduled');
        break;
      case 'skip':
        plan.skip.push(id);
        effective.set(id, 'skipped');
        break;
      case 'upstream_failed':
        plan.upstreamFailed.push(id);
        effective.set(id, 'upstream_failed');
        break;
      case 'wait':
        effective.set(id, 'none');
        break;
    }
  }
  return plan;
}

/**
 * The run's state implied by its task instances.
 *
 * `running` until every spec task is terminal (absent counts as `none`). Then Airflow's leaf
 * rule: `failed` iff some leaf task (one nothing depends on) is failed or upstream_failed,
 * otherwise `success`. So a failure absorbed by a downstream `all_done` / `one_failed` task
 * that itself succeeds does not fail the run, while a skipped leaf does not fail it either.
 * A DAG with no tasks is vacuously `success`.
 */
export function runOutcome(
  spec: DagSpec,
  states: ReadonlyMap<string, TaskInstanceState>,
): RunOutcome {
  const g = buildGraph(spec);
  let leafFailed = false;
  for (const id of g.topo) {
    const s = states.get(id) ?? 'none';
    if (!isTerminal(s)) return 'running';
    if (g.downstream.get(id)!.length === 0 && (s === 'failed' || s === 'upstream_failed')) {
      leafFailed = true;
    }
  }
  return leafFailed ? 'failed' : 'success';
}

/**
 * Every task transitively downstream of `taskId` (not including it), upstreams before
 * downstreams, for `clear --downstream`.
 */
export function downstreamOf(spec: DagSpec, taskId: string): string[] {
  const g = buildGraph(spec);
  if (!g.byId.has(taskId)) {
    throw new LeoflowError(
      'LF_TASK_NOT_FOUND',
      `DAG '${spec.dag_id}' has no task '${taskId}'; list its tasks and pick one of them.`,
      { dag_id: spec.dag_id, task_id: taskId },
    );
  }
  const reached = new Set<string>();
  const stack = [taskId];
  while (stack.length > 0) {
    for (const d of g.downstream.get(stack.pop()!)!) {
      if (!reached.has(d)) {
        reached.add(d);
        stack.push(d);
      }
    }
  }
  return g.topo.filter((id) => reached.has(id));
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
