import dagre from '@dagrejs/dagre';
import { Background, Controls, Position, ReactFlow, type Edge, type Node } from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import { useMemo } from 'react';
import { useNavigate } from 'react-router';
import type { SpecTask } from '../api';
import { stateClass } from '../format';

const W = 220;
const H = 78;

export interface GraphProps {
  tasks: readonly SpecTask[];
  /** task states of one run (the run page); absent on the DAG page */
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

function TaskLabel({ t, state }: { t: SpecTask; state: string | undefined }) {
  return (
    <div className="node-body">
      <div className="node-title">
        {state && <span className={`dot ${stateClass(state)}`} role="img" aria-label={state} />}
        {t.task_id}
      </div>
      <div className="node-meta">
        {t.type} · {t.trigger_rule}
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

export default function Graph({ tasks, states, hrefOf }: GraphProps) {
  const navigate = useNavigate();
  const { nodes, edges } = useMemo(() => {
    const pos = layout(tasks);
    const nodes: Node[] = tasks.map((t) => ({
      id: t.task_id,
      position: pos[t.task_id] ?? { x: 0, y: 0 },
      data: { label: <TaskLabel t={t} state={states?.[t.task_id]} /> },
      className: `task-node ${states ? stateClass(states[t.task_id]) : ''}`,
      style: { width: W },
      draggable: false,
      connectable: false,
      sourcePosition: Position.Right,
      targetPosition: Position.Left,
    }));
    const edges: Edge[] = tasks.flatMap((t) =>
      t.depends_on.map((up) => ({ id: `${up}->${t.task_id}`, source: up, target: t.task_id })),
    );
    return { nodes, edges };
  }, [tasks, states]);
  return (
    <div className="graph" aria-label="task graph">
      <ReactFlow
        nodes={nodes}
        edges={edges}
        fitView
        fitViewOptions={{ maxZoom: 1 }}
        nodesDraggable={false}
        nodesConnectable={false}
        onNodeClick={(_e, n) => hrefOf && void navigate(hrefOf(n.id))}
      >
        <Background />
        <Controls showInteractive={false} />
      </ReactFlow>
    </div>
  );
}
