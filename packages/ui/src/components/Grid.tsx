import { Link } from 'react-router';
import type { Run, TaskInstance } from '../api';
import { duration, stateClass } from '../format';

export interface GridProps {
  dagId: string;
  taskIds: readonly string[];
  /** oldest first: the newest run is the right-most column */
  runs: readonly Run[];
  /** task instances by run id (absent while loading) */
  instances: Readonly<Record<string, readonly TaskInstance[] | undefined>>;
}

/**
 * Runs × tasks: one column per run, one row per task; each cell is the task's state colour, its
 * try number when it retried, and its duration on hover. Every cell links to the attempt.
 */
export function Grid({ dagId, taskIds, runs, instances }: GridProps) {
  if (runs.length === 0) {
    return <p className="empty">No runs yet. Trigger one, or wait for the schedule.</p>;
  }
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
          {taskIds.map((taskId) => (
            <tr key={taskId}>
              <th scope="row">{taskId}</th>
              {runs.map((r) => {
                const ti = instances[r.run_id]?.find((t) => t.task_id === taskId);
                const state = ti?.state ?? 'none';
                const label = ti
                  ? `${taskId} in ${r.run_id}: ${state}, try ${ti.try_number}, ${duration(ti.started_at, ti.ended_at)}`
                  : `${taskId} in ${r.run_id}: no instance`;
                return (
                  <td key={r.run_id}>
                    <Link
                      to={`/dags/${encodeURIComponent(dagId)}/runs/${encodeURIComponent(r.run_id)}/tasks/${encodeURIComponent(taskId)}`}
                      className={`cell ${stateClass(state)}`}
                      title={label}
                      aria-label={label}
                      data-state={state}
                      data-testid={`cell-${r.run_id}-${taskId}`}
                    >
                      {ti && ti.try_number > 1 ? ti.try_number : ''}
                    </Link>
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
