import {
  expandTask,
  mappableList,
  maxMapLength,
  type DagSpec,
  type ErrorCode,
  type RunStates,
  type TaskInstanceState,
  type TaskSpecDef,
} from '@leoflow/core';
import type { LeaderFence } from '../store/ports/leader-fence.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type { XComStore } from '../store/ports/xcom.js';

/** An upstream a mapped task expands over pushed no return value (its instances: upstream_failed). */
const NO_VALUES: ErrorCode = 'LF_MAP_NO_VALUES';
import type { TaskInstanceRow } from '../store/types.js';

/**
 * What the planner sees of a run (issue 41): each task's state — or, for an expanded mapped
 * task, its map indexes' states — and the tasks that a finished branch or short-circuit decided
 * to skip.
 */
export function runView(
  spec: DagSpec,
  tis: readonly TaskInstanceRow[],
): { states: RunStates; skippedByDecision: Set<string>; unexpanded: Map<string, TaskInstanceRow> } {
  const byTask = new Map<string, TaskInstanceRow[]>();
  for (const ti of tis) {
    let list = byTask.get(ti.task_id);
    if (list === undefined) byTask.set(ti.task_id, (list = []));
    list.push(ti);
  }
  const states = new Map<string, TaskInstanceState | TaskInstanceState[]>();
  const unexpanded = new Map<string, TaskInstanceRow>();
  const skippedByDecision = new Set<string>();
  for (const t of spec.tasks) {
    const rows = byTask.get(t.task_id);
    if (rows === undefined || rows.length === 0) {
      states.set(t.task_id, 'none');
      continue;
    }
    const single = rows.find((r) => r.map_index === -1);
    if (single !== undefined) {
      states.set(t.task_id, single.state);
      unexpanded.set(t.task_id, single);
    } else {
      states.set(
        t.task_id,
        rows.map((r) => r.state),
      );
    }
    for (const r of rows) {
      if (r.state === 'success' && r.decision !== null) {
        for (const id of r.decision.skipped) skippedByDecision.add(id);
      }
    }
  }
  return { states, skippedByDecision, unexpanded };
}

export type ExpansionOutcome =
  | { kind: 'expanded'; indexes: number }
  | { kind: 'skipped' }
  | { kind: 'upstream_failed'; reason: string }
  | { kind: 'lost' };

const utf8 = new TextDecoder('utf-8', { fatal: true });

function parsed(value: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(value);
  } catch {
    return Buffer.from(value).toString('base64');
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * Expands a mapped task whose trigger rule is met (Airflow's expand at scheduling time): its
 * lists are read (literal, or the upstream's return value — for a mapped upstream, its indexes'
 * values), and its unexpanded row becomes one `scheduled` row per element in one fenced write.
 * A zero-length expansion is skipped; an upstream that pushed no usable list, or a product past
 * max_map_length, leaves the task upstream_failed with the coded reason (Airflow marks the
 * unexpanded instance upstream_failed when its upstream values are missing). `lost`: the fenced
 * write did not apply (the row moved on, or this scheduler is no longer the leader).
 */
export async function expandMapped(
  store: Pick<TaskInstanceStore, 'expandTaskInstance' | 'updateTaskInstance'> &
    Pick<XComStore, 'getXCom' | 'listMappedXComs'>,
  spec: DagSpec,
  task: TaskSpecDef,
  row: TaskInstanceRow,
  fence: LeaderFence,
  now: number,
): Promise<ExpansionOutcome> {
  const lists = new Map<string, unknown[]>();
  for (const arg of task.expand ?? []) {
    if (!('xcom' in arg) || lists.has(arg.xcom)) continue;
    const upstream = spec.tasks.find((t) => t.task_id === arg.xcom);
    if (upstream?.expand !== undefined) {
      const rows = await store.listMappedXComs(row.dag_run_id, arg.xcom, 'return_value');
      lists.set(
        arg.xcom,
        rows.map((r) => parsed(r.value)),
      );
      continue;
    }
    const x = await store.getXCom(row.dag_run_id, arg.xcom, 'return_value');
    if (x === undefined) {
      return {
        kind: 'upstream_failed',
        reason: `${NO_VALUES}: "${task.task_id}" maps over the return value of "${arg.xcom}", which pushed none; make "${arg.xcom}" print a JSON list as its last stdout line`,
      };
    }
    let text = '';
    try {
      text = utf8.decode(x.value);
    } catch {
      text = '';
    }
    const check = mappableList(text, maxMapLength(task), arg.xcom);
    if (!check.ok) return { kind: 'upstream_failed', reason: `${check.code}: ${check.message}` };
    lists.set(arg.xcom, check.values);
  }
  const expansion = expandTask(task, lists);
  if (!expansion.ok) {
    return { kind: 'upstream_failed', reason: `${expansion.code}: ${expansion.message}` };
  }
  const expect = { states: ['none'] as const, try_number: row.try_number, leader: fence };
  if (expansion.indexes.length === 0) {
    const applied = await store.updateTaskInstance(
      row.id,
      expect,
      { state: 'skipped', ended_at: now },
      now,
    );
    return applied ? { kind: 'skipped' } : { kind: 'lost' };
  }
  const applied = await store.expandTaskInstance(
    row.id,
    expect,
    expansion.indexes.map((map_value) => ({ map_value })),
    task.retries,
    now,
  );
  return applied ? { kind: 'expanded', indexes: expansion.indexes.length } : { kind: 'lost' };
}
