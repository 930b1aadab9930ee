import { Link } from 'react-router';
import type { TaskInstance } from '../api';
import { duration, stateClass } from '../format';

export interface GanttProps {
  /** link target of a task's bar (a mapped task's: with its map index) */
  hrefOf: (taskId: string, mapIndex?: number) => string;
  taskInstances: readonly TaskInstance[];
  /** "now" for bars still running (injectable for tests) */
  now?: number;
}

/**
 * A run's tasks on one time axis: each bar spans started_at → ended_at (or now while running),
 * in the task's state colour. Plain CSS positions, no chart library.
 */
export function Gantt({ hrefOf, taskInstances, now = Date.now() }: GanttProps) {
  const bars = taskInstances
    .filter((t) => t.started_at)
    .map((t) => {
      const start = Date.parse(t.started_at as string);
      const end = t.ended_at ? Date.parse(t.ended_at) : now;
      return { t, start, end: Math.max(end, start) };
    });
  if (bars.length === 0) {
    return <p className="empty">No task has started yet: the bars appear as tasks run.</p>;
  }
  const t0 = Math.min(...bars.map((b) => b.start));
  const t1 = Math.max(...bars.map((b) => b.end));
  const span = Math.max(t1 - t0, 1);
  return (
    <div className="gantt" role="list" aria-label="Gantt chart of the run's tasks">
      {bars.map(({ t, start, end }) => {
        const left = ((start - t0) / span) * 100;
        const width = Math.max(((end - start) / span) * 100, 0.5);
        const name = t.map_index >= 0 ? `${t.task_id}[${t.map_index}]` : t.task_id;
        const label = `${name}: ${t.state}, ${duration(t.started_at, t.ended_at, now)}`;
        return (
          <div className="gantt-row" role="listitem" key={name}>
            <span className="gantt-name">{name}</span>
            <span className="gantt-track">
              <Link
                to={hrefOf(t.task_id, t.map_index)}
                className={`gantt-bar ${stateClass(t.state)}`}
                style={{ left: `${left}%`, width: `${width}%` }}
                title={label}
                aria-label={label}
                data-testid={`gantt-${name}`}
              />
            </span>
          </div>
        );
      })}
      <div className="gantt-axis sub">
        <span>0s</span>
        <span>{duration(new Date(t0).toISOString(), new Date(t1).toISOString())}</span>
      </div>
    </div>
  );
}
