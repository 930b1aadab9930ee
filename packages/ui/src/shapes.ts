import type { SpecTask, TaskGroup } from './api';

/**
 * Task groups and mapped tasks in the grid and the graph (issue 41): pure helpers, so the
 * components stay small and the rules are tested on their own.
 */

/**
 * One state for several (a group's tasks, a mapped task's indexes), as Airflow's grid picks it:
 * the first of this list that any of them is in.
 */
const PRIORITY = [
  'failed',
  'upstream_failed',
  'up_for_retry',
  'up_for_reschedule',
  'queued',
  'scheduled',
  'running',
  'none',
  'success',
  'skipped',
];

export function summaryState(states: readonly string[]): string {
  if (states.length === 0) return 'none';
  for (const s of PRIORITY) if (states.includes(s)) return s;
  return states[0]!;
}

/** "3 success, 2 running": what a mapped cell or a group cell holds. */
export function stateCounts(states: readonly string[]): string {
  const n = new Map<string, number>();
  for (const s of states) n.set(s, (n.get(s) ?? 0) + 1);
  return [...n.entries()].map(([s, k]) => `${k} ${s}`).join(', ');
}

/** The groups a task or group sits in, innermost first. */
export function ancestors(groupId: string | undefined, groups: readonly TaskGroup[]): string[] {
  const parent = new Map(groups.map((g) => [g.group_id, g.parent]));
  const out: string[] = [];
  for (let g = groupId; g !== undefined; g = parent.get(g)) out.push(g);
  return out;
}

/** The outermost collapsed group hiding `groupId`'s content (or the task itself), if any. */
function hiddenIn(
  groupId: string | undefined,
  groups: readonly TaskGroup[],
  collapsed: ReadonlySet<string>,
): string | undefined {
  const chain = ancestors(groupId, groups);
  let hidden: string | undefined;
  for (const g of chain) if (collapsed.has(g)) hidden = g;
  return hidden;
}

export type GridRow =
  | { kind: 'group'; id: string; depth: number; label: string; members: string[]; open: boolean }
  | { kind: 'task'; id: string; depth: number; label: string };

/**
 * The grid's rows: each group (Airflow's collapsible group row) followed by its tasks and nested
 * groups when open, in the DAG's order; a collapsed group's tasks are not listed. Labels drop the
 * group prefix of the id, as Airflow's grid shows them inside their group.
 */
export function gridRows(
  tasks: readonly SpecTask[],
  groups: readonly TaskGroup[],
  collapsed: ReadonlySet<string>,
): GridRow[] {
  const rows: GridRow[] = [];
  const emitted = new Set<string>();
  const members = (g: string): string[] =>
    tasks.filter((t) => ancestors(t.group, groups).includes(g)).map((t) => t.task_id);
  const shortName = (id: string, inside: string | undefined): string =>
    inside !== undefined && id.startsWith(`${inside}.`) ? id.slice(inside.length + 1) : id;
  for (const t of tasks) {
    const chain = ancestors(t.group, groups).reverse(); // outermost first
    let visible = true;
    for (const [depth, g] of chain.entries()) {
      if (!visible) break;
      if (!emitted.has(g)) {
        emitted.add(g);
        const parent = chain[depth - 1];
        rows.push({
          kind: 'group',
          id: g,
          depth,
          label: shortName(g, parent),
          members: members(g),
          open: !collapsed.has(g),
        });
      }
      if (collapsed.has(g)) visible = false;
    }
    if (visible) {
      rows.push({
        kind: 'task',
        id: t.task_id,
        depth: chain.length,
        label: shortName(t.task_id, t.group),
      });
    }
  }
  return rows;
}

/** A node of the graph: a task, or a collapsed group standing for its tasks. */
export interface GraphNodeView extends SpecTask {
  kind: 'task' | 'group';
  /** a group node's tasks */
  members: string[];
}

/** A collapsed group's node id: task ids never contain ':'. */
export const groupNodeId = (g: string): string => `group:${g}`;

/**
 * The graph with collapsed groups folded into one node each: an edge into or out of a collapsed
 * group attaches to its node; edges inside it disappear; duplicates merge.
 */
export function graphView(
  tasks: readonly SpecTask[],
  groups: readonly TaskGroup[],
  collapsed: ReadonlySet<string>,
): GraphNodeView[] {
  const rep = new Map<string, string>();
  const nodes = new Map<string, GraphNodeView>();
  for (const t of tasks) {
    const g = hiddenIn(t.group, groups, collapsed);
    const id = g === undefined ? t.task_id : groupNodeId(g);
    rep.set(t.task_id, id);
    if (g === undefined) {
      nodes.set(id, { ...t, depends_on: [], kind: 'task', members: [t.task_id] });
    } else {
      const node = nodes.get(id) ?? {
        task_id: id,
        type: 'group',
        depends_on: [],
        trigger_rule: '',
        retries: 0,
        variables: [],
        connections: [],
        group: groups.find((x) => x.group_id === g)?.parent,
        kind: 'group' as const,
        members: [],
      };
      node.members.push(t.task_id);
      node.variables = [...new Set([...node.variables, ...t.variables])];
      node.connections = [...new Set([...node.connections, ...t.connections])];
      nodes.set(id, node);
    }
  }
  for (const t of tasks) {
    const to = rep.get(t.task_id)!;
    const node = nodes.get(to)!;
    for (const up of t.depends_on) {
      const from = rep.get(up);
      if (from === undefined || from === to || node.depends_on.includes(from)) continue;
      node.depends_on.push(from);
    }
  }
  return [...nodes.values()];
}

/** A task instance as the grid and graph need it. */
export interface InstanceView {
  task_id: string;
  map_index: number;
  state: string;
  try_number: number;
}

/** A task's instances in one run: one, or one per map index once it is mapped. */
export function instancesOf<T extends InstanceView>(all: readonly T[], taskId: string): T[] {
  return all.filter((t) => t.task_id === taskId).sort((a, b) => a.map_index - b.map_index);
}

/** The state a node or cell shows: a task's, a mapped task's indexes', a group's tasks'. */
export function stateOf(
  all: readonly InstanceView[],
  taskIds: readonly string[],
): string | undefined {
  const states = all.filter((t) => taskIds.includes(t.task_id)).map((t) => t.state);
  return states.length === 0 ? undefined : summaryState(states);
}
