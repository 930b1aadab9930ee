import { useState } from 'react';
import { Link } from 'react-router';
import type { Run, SpecTask, TaskGroup, TaskInstance } from '../api';
import { duration, stateClass } from '../format';
import { gridRows, instancesOf, stateCounts, stateOf } from '../shapes';

export interface GridProps {
  dagId: string;
  /** the DAG's tasks in its order (their groups and whether they are mapped come from here) */
  tasks: readonly Pick<SpecTask, 'task_id' | 'group' | 'expand'>[];
  groups?: readonly TaskGroup[];
  /** oldest first: the newest run is the right-most column */
  runs: readonly Run[];
  /** task instances by run id (absent while loading) */
  instances: Readonly<Record<string, readonly TaskInstance[] | undefined>>;
}

/**
 * Runs × tasks: one column per run, one row per task; each cell is the task's state colour, its
 * try number when it retried, and its duration on hover. Every cell links to the attempt.
 *
 * Task groups are rows of their own, collapsed at first (as in Airflow's grid): the group's cell
 * shows its tasks' state; opening it lists them. A mapped task's cell shows how many map indexes
 * it has and their states; opening its row lists one row per map index.
 */
export function Grid({ dagId, tasks, groups = [], runs, instances }: GridProps) {
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(
    () => new Set(groups.map((g) => g.group_id)),
  );
  const [openMapped, setOpenMapped] = useState<ReadonlySet<string>>(() => new Set());
  if (runs.length === 0) {
    return <p className="empty">No runs yet. Trigger one, or wait for the schedule.</p>;
  }
  const toggle = (set: ReadonlySet<string>, id: string): Set<string> => {
    const next = new Set(set);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    return next;
  };
  const specTasks = tasks.map((t) => ({
    task_id: t.task_id,
    group: t.group,
    type: '',
    depends_on: [],
    trigger_rule: '',
    retries: 0,
    variables: [],
    connections: [],
  }));
  const mapped = new Set(tasks.filter((t) => t.expand !== undefined).map((t) => t.task_id));
  const rows = gridRows(specTasks, groups, collapsed);
  const taskHref = (runId: string, taskId: string, mapIndex?: number) =>
    `/dags/${encodeURIComponent(dagId)}/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(taskId)}${mapIndex !== undefined && mapIndex >= 0 ? `?map_index=${mapIndex}` : ''}`;
  const maxIndexes = (taskId: string): number =>
    Math.max(
      0,
      ...runs.map(
        (r) =>
          instancesOf(instances[r.run_id] ?? [], taskId).filter((t) => t.map_index >= 0).length,
      ),
    );

  return (
    <div className="grid-wrap">
      <table className="grid" aria-label={`Runs of ${dagId} by task`}>
        <thead>
          <tr>
            <th scope="col">Task</th>
            {runs.map((r) => (
              <th scope="col" key={r.run_id}>
                <Link
                  to={`/dags/${encodeURIComponent(dagId)}/runs/${encodeURIComponent(r.run_id)}`}
                  className={`run-head ${stateClass(r.state)}`}
                  title={`${r.run_id}: ${r.state}`}
                  aria-label={`run ${r.run_id}: ${r.state}`}
                />
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.flatMap((row) => {
            const indent = { paddingLeft: `${0.5 + row.depth * 1.2}em` };
            if (row.kind === 'group') {
              return [
                <tr key={`g:${row.id}`} className="group-row">
                  <th scope="row" style={indent}>
                    <button
                      type="button"
                      className="link"
                      aria-expanded={row.open}
                      onClick={() => setCollapsed((c) => toggle(c, row.id))}
                    >
                      {row.open ? '▾' : '▸'} {row.label}
                    </button>{' '}
                    <span className="sub">({row.members.length} tasks)</span>
                  </th>
                  {runs.map((r) => {
                    const all = instances[r.run_id] ?? [];
                    const state = stateOf(all, row.members) ?? 'none';
                    const label = `group ${row.id} in ${r.run_id}: ${state} (${stateCounts(all.filter((t) => row.members.includes(t.task_id)).map((t) => t.state)) || 'no instances'})`;
                    return (
                      <td key={r.run_id}>
                        <span
                          className={`cell group ${stateClass(state)}`}
                          title={label}
                          aria-label={label}
                          data-state={state}
                          data-testid={`cell-${r.run_id}-group:${row.id}`}
                        />
                      </td>
                    );
                  })}
                </tr>,
              ];
            }
            const isMapped = mapped.has(row.id);
            const open = openMapped.has(row.id);
            const out = [
              <tr key={row.id}>
                <th scope="row" style={indent}>
                  {isMapped ? (
                    <button
                      type="button"
                      className="link"
                      aria-expanded={open}
                      onClick={() => setOpenMapped((m) => toggle(m, row.id))}
                    >
                      {open ? '▾' : '▸'} {row.label} <span className="sub">[mapped]</span>
                    </button>
                  ) : (
                    row.label
                  )}
                </th>
                {runs.map((r) => {
                  const tis = instancesOf(instances[r.run_id] ?? [], row.id);
                  const expanded = tis.filter((t) => t.map_index >= 0);
                  const ti = tis[0];
                  const state =
                    expanded.length > 0
                      ? (stateOf(expanded, [row.id]) ?? 'none')
                      : (ti?.state ?? 'none');
                  const label =
                    expanded.length > 0
                      ? `${row.id} in ${r.run_id}: ${expanded.length} map indexes (${stateCounts(expanded.map((t) => t.state))})`
                      : ti
                        ? `${row.id} in ${r.run_id}: ${state}, try ${ti.try_number}, ${duration(ti.started_at, ti.ended_at)}`
                        : `${row.id} in ${r.run_id}: no instance`;
                  return (
                    <td key={r.run_id}>
                      <Link
                        to={taskHref(r.run_id, row.id)}
                        className={`cell ${stateClass(state)}`}
                        title={label}
                        aria-label={label}
                        data-state={state}
                        data-testid={`cell-${r.run_id}-${row.id}`}
                      >
                        {expanded.length > 0
                          ? expanded.length
                          : ti && ti.try_number > 1
                            ? ti.try_number
                            : ''}
                      </Link>
                    </td>
                  );
                })}
              </tr>,
            ];
            if (isMapped && open) {
              for (let i = 0; i < maxIndexes(row.id); i++) {
                out.push(
                  <tr key={`${row.id}[${i}]`} className="map-index-row">
                    <th scope="row" style={{ paddingLeft: `${1.7 + row.depth * 1.2}em` }}>
                      [{i}]
                    </th>
                    {runs.map((r) => {
                      const ti = instancesOf(instances[r.run_id] ?? [], row.id).find(
                        (t) => t.map_index === i,
                      );
                      const state = ti?.state ?? 'none';
                      const label = ti
                        ? `${row.id}[${i}] in ${r.run_id}: ${state}, try ${ti.try_number}, ${duration(ti.started_at, ti.ended_at)}`
                        : `${row.id}[${i}] in ${r.run_id}: no instance`;
                      return (
                        <td key={r.run_id}>
                          {ti ? (
                            <Link
                              to={taskHref(r.run_id, row.id, i)}
                              className={`cell ${stateClass(state)}`}
                              title={label}
                              aria-label={label}
                              data-state={state}
                              data-testid={`cell-${r.run_id}-${row.id}[${i}]`}
                            >
                              {ti.try_number > 1 ? ti.try_number : ''}
                            </Link>
                          ) : (
                            <span className="cell" title={label} aria-label={label} />
                          )}
                        </td>
                      );
                    })}
                  </tr>,
                );
              }
            }
            return out;
          })}
        </tbody>
      </table>
    </div>
  );
}
