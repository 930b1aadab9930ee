import dagre from '@dagrejs/dagre';
import { Background, Controls, Position, ReactFlow, type Edge, type Node } from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import { useMemo, useRef, useState, type KeyboardEvent } from 'react';
import { useNavigate } from 'react-router';
import type { SpecTask, TaskGroup } from '../api';
import { stateClass } from '../format';
import { graphView, summaryState, type GraphNodeView } from '../shapes';

const W = 220;
const H = 78;

export interface GraphProps {
  tasks: readonly SpecTask[];
  /** the DAG's task groups: each is drawn as one node until opened (a click toggles it) */
  groups?: readonly TaskGroup[];
  /** task states of one run (the run page; a mapped task's summed over its indexes); absent on the DAG page */
  states?: Readonly<Record<string, string>>;
  /** where a click on a task goes */
  hrefOf?: (taskId: string) => string;
}

/** Lays the tasks out left to right with dagre (the dependencies are the edges). */
export function layout(tasks: readonly SpecTask[]): Record<string, { x: number; y: number }> {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 24, ranksep: 60 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const t of tasks) g.setNode(t.task_id, { width: W, height: H });
  for (const t of tasks) for (const up of t.depends_on) if (g.hasNode(up)) g.setEdge(up, t.task_id);
  dagre.layout(g);
  const out: Record<string, { x: number; y: number }> = {};
  for (const t of tasks) {
    const n = g.node(t.task_id);
    out[t.task_id] = { x: n.x - W / 2, y: n.y - H / 2 };
  }
  return out;
}

export type GraphKey = 'ArrowRight' | 'ArrowLeft' | 'ArrowUp' | 'ArrowDown' | 'Home' | 'End';

/**
 * Where a key moves the focus from task `from`, following the picture: right to a downstream
 * task and left to an upstream one (the one nearest in height), up and down within the
 * column, Home and End to the first and last task in reading order. null: nowhere to go.
 */
export function neighbour(
  tasks: readonly SpecTask[],
  pos: Readonly<Record<string, { x: number; y: number }>>,
  from: string,
  key: GraphKey,
): string | null {
  const here = pos[from];
  if (!here) return null;
  const nearest = (ids: string[]) =>
    ids
      .filter((id) => pos[id])
      .sort((a, b) => Math.abs(pos[a]!.y - here.y) - Math.abs(pos[b]!.y - here.y))[0] ?? null;
  const order = readingOrder(tasks, pos);
  switch (key) {
    case 'ArrowRight':
      return nearest(tasks.filter((t) => t.depends_on.includes(from)).map((t) => t.task_id));
    case 'ArrowLeft':
      return nearest([...(tasks.find((t) => t.task_id === from)?.depends_on ?? [])]);
    case 'ArrowUp':
    case 'ArrowDown': {
      const column = order
        .filter((id) => Math.abs(pos[id]!.x - here.x) < 1)
        .sort((a, b) => pos[a]!.y - pos[b]!.y);
      const i = column.indexOf(from) + (key === 'ArrowDown' ? 1 : -1);
      return column[i] ?? null;
    }
    case 'Home':
      return order[0] ?? null;
    case 'End':
      return order[order.length - 1] ?? null;
  }
}

/** Left to right, then top to bottom: the order Tab follows (the nodes' order in the page). */
export function readingOrder(
  tasks: readonly SpecTask[],
  pos: Readonly<Record<string, { x: number; y: number }>>,
): string[] {
  return tasks
    .map((t) => t.task_id)
    .filter((id) => pos[id])
    .sort((a, b) => pos[a]!.x - pos[b]!.x || pos[a]!.y - pos[b]!.y);
}

const GRAPH_KEYS = new Set<string>([
  'ArrowRight',
  'ArrowLeft',
  'ArrowUp',
  'ArrowDown',
  'Home',
  'End',
]);

/** What a screen reader says about a task node. */
function nodeLabel(t: SpecTask | GraphNodeView, state: string | undefined): string {
  if ('kind' in t && t.kind === 'group') {
    return [
      `task group ${t.task_id.slice('group:'.length)}, closed, ${t.members.length} tasks`,
      ...(state ? [state] : []),
      t.depends_on.length > 0 ? `after ${t.depends_on.join(', ')}` : 'no upstream task',
      'Enter opens the group',
    ].join('; ');
  }
  return [
    `task ${t.task_id}`,
    ...(state ? [state] : []),
    t.type,
    `trigger rule ${t.trigger_rule}`,
    t.depends_on.length > 0 ? `after ${t.depends_on.join(', ')}` : 'no upstream task',
    ...(t.variables.length > 0 ? [`Variables ${t.variables.join(', ')}`] : []),
    ...(t.connections.length > 0 ? [`Connections ${t.connections.join(', ')}`] : []),
  ].join('; ');
}

/** The small marks of issue 41's shapes a node carries. */
function shapeMarks(t: SpecTask): string {
  return [
    t.setup ? 'setup' : '',
    t.teardown ? 'teardown' : '',
    t.branch !== undefined ? 'branch' : '',
    t.short_circuit !== undefined ? 'short-circuit' : '',
    t.expand !== undefined ? 'mapped [ ]' : '',
  ]
    .filter((m) => m !== '')
    .join(' · ');
}

function TaskLabel({ t, state }: { t: SpecTask | GraphNodeView; state: string | undefined }) {
  if ('kind' in t && t.kind === 'group') {
    return (
      <div className="node-body">
        <div className="node-title">
          {state && <span className={`dot ${stateClass(state)}`} role="img" aria-label={state} />}▸{' '}
          {t.task_id.slice('group:'.length)}
        </div>
        <div className="node-meta">task group · {t.members.length} tasks</div>
      </div>
    );
  }
  const marks = shapeMarks(t);
  return (
    <div className="node-body">
      <div className="node-title">
        {state && <span className={`dot ${stateClass(state)}`} role="img" aria-label={state} />}
        {t.task_id}
      </div>
      <div className="node-meta">
        {t.type} · {t.trigger_rule}
        {marks && ` · ${marks}`}
      </div>
      {(t.variables.length > 0 || t.connections.length > 0) && (
        <div className="node-decl" title="declared Variables and Connections">
          {t.variables.map((v) => (
            <span key={`v-${v}`} className="chip">
              var {v}
            </span>
          ))}
          {t.connections.map((c) => (
            <span key={`c-${c}`} className="chip">
              conn {c}
            </span>
          ))}
        </div>
      )}
    </div>
  );
}

export default function Graph({
  tasks: allTasks,
  groups = [],
  states: taskStates,
  hrefOf,
}: GraphProps) {
  const navigate = useNavigate();
  const box = useRef<HTMLDivElement>(null);
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(
    () => new Set(groups.map((g) => g.group_id)),
  );
  // Collapsed groups are single nodes; a group node's state is its tasks'.
  const tasks = useMemo(
    () => graphView(allTasks, groups, collapsed),
    [allTasks, groups, collapsed],
  );
  const states = useMemo(() => {
    if (!taskStates) return undefined;
    const out: Record<string, string> = { ...taskStates };
    for (const n of tasks) {
      if (n.kind !== 'group') continue;
      const member = n.members
        .map((m) => taskStates[m])
        .filter((x): x is string => x !== undefined);
      if (member.length > 0) out[n.task_id] = summaryState(member);
    }
    return out;
  }, [tasks, taskStates]);
  const toggleGroup = (nodeId: string): boolean => {
    if (!nodeId.startsWith('group:')) return false;
    const g = nodeId.slice('group:'.length);
    setCollapsed((c) => {
      const next = new Set(c);
      next.delete(g);
      return next;
    });
    return true;
  };
  const { nodes, edges, pos } = useMemo(() => {
    const pos = layout(tasks);
    const byId = new Map(tasks.map((t) => [t.task_id, t]));
    // Nodes in reading order, so Tab walks the picture left to right.
    const nodes: Node[] = readingOrder(tasks, pos).map((id) => {
      const t = byId.get(id)!;
      return {
        id,
        position: pos[id] ?? { x: 0, y: 0 },
        data: { label: <TaskLabel t={t} state={states?.[id]} /> },
        ariaLabel: nodeLabel(t, states?.[id]),
        className: `task-node ${t.kind === 'group' ? 'group-node' : ''} ${states ? stateClass(states[id]) : ''}`,
        style: { width: W },
        draggable: false,
        connectable: false,
        sourcePosition: Position.Right,
        targetPosition: Position.Left,
      };
    });
    const edges: Edge[] = tasks.flatMap((t) =>
      t.depends_on.map((up) => ({ id: `${up}->${t.task_id}`, source: up, target: t.task_id })),
    );
    return { nodes, edges, pos };
  }, [tasks, states]);

  const onKeyDown = (e: KeyboardEvent<HTMLDivElement>) => {
    const node = (e.target as HTMLElement).closest<HTMLElement>('.react-flow__node');
    const id = node?.dataset.id;
    if (!id) return;
    if (e.key === 'Enter' && toggleGroup(id)) {
      e.preventDefault();
      return;
    }
    if (e.key === 'Enter' && hrefOf) {
      e.preventDefault();
      void navigate(hrefOf(id));
      return;
    }
    if (!GRAPH_KEYS.has(e.key)) return;
    e.preventDefault();
    const next = neighbour(tasks, pos, id, e.key as GraphKey);
    if (next === null) return;
    box.current
      ?.querySelector<HTMLElement>(`.react-flow__node[data-id="${CSS.escape(next)}"]`)
      ?.focus();
  };

  const open = groups.filter((g) => !collapsed.has(g.group_id));
  return (
    <>
      {groups.length > 0 && (
        <div className="actions graph-groups">
          <button
            type="button"
            onClick={() =>
              setCollapsed(
                collapsed.size === groups.length
                  ? new Set()
                  : new Set(groups.map((g) => g.group_id)),
              )
            }
          >
            {collapsed.size === groups.length ? 'Open every group' : 'Close every group'}
          </button>
          {open.map((g) => (
            <button
              key={g.group_id}
              type="button"
              title={g.tooltip}
              onClick={() => setCollapsed((c) => new Set([...c, g.group_id]))}
            >
              ▾ close {g.group_id}
            </button>
          ))}
        </div>
      )}
      <div className="graph" role="group" aria-label="task graph" ref={box} onKeyDown={onKeyDown}>
        <ReactFlow
          nodes={nodes}
          edges={edges}
          fitView
          fitViewOptions={{ maxZoom: 1 }}
          nodesDraggable={false}
          nodesConnectable={false}
          // Focus moves between tasks, not edges; Enter opens a task rather than selecting it.
          nodesFocusable
          edgesFocusable={false}
          elementsSelectable={false}
          deleteKeyCode={null}
          autoPanOnNodeFocus
          ariaLabelConfig={{
            'node.a11yDescription.default': hrefOf
              ? 'Arrow keys move between tasks: right to a downstream task, left to an upstream one, up and down within a column. Enter opens the task.'
              : 'Arrow keys move between tasks: right to a downstream task, left to an upstream one, up and down within a column.',
          }}
          onNodeClick={(_e, n) => {
            if (!toggleGroup(n.id) && hrefOf) void navigate(hrefOf(n.id));
          }}
        >
          <Background />
          <Controls showInteractive={false} />
        </ReactFlow>
      </div>
    </>
  );
}
