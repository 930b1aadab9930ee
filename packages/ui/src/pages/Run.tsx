import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Suspense } from 'react';
import { Link, useParams } from 'react-router';
import { api, enc, get, type Reply } from '../api';
import { Gantt } from '../components/Gantt';
import { StateBadge } from '../components/StateBadge';
import { Time } from '../components/Time';
import { duration } from '../format';
import { summaryState } from '../shapes';
import { useLive } from '../live';
import { useCan } from '../session';
import { Graph, useDag } from './Dag';
import { ErrorNote } from './Layout';

const LIVE = ['scheduled', 'queued', 'running'];

export function Run() {
  const { dagId = '', runId = '' } = useParams();
  const can = useCan();
  const qc = useQueryClient();
  useLive({ dagId });
  const dag = useDag(dagId);
  const run = useQuery({
    queryKey: ['run', dagId, runId],
    queryFn: () =>
      get<Reply<'get_dags_by_dag_id_runs_by_run_id'>>(
        `/api/v1/dags/${enc(dagId)}/runs/${enc(runId)}`,
      ),
  });
  const refresh = () => qc.invalidateQueries({ queryKey: ['run', dagId, runId] });
  const clear = useMutation({
    mutationFn: (taskId: string) =>
      api('POST', `/api/v1/dags/${enc(dagId)}/runs/${enc(runId)}/clear`, {
        task_ids: [taskId],
        downstream: true,
      }),
    onSettled: refresh,
  });
  const revoke = useMutation({
    mutationFn: (t: { task_id: string; map_index: number }) =>
      api(
        'POST',
        `/api/v1/dags/${enc(dagId)}/runs/${enc(runId)}/tasks/${enc(t.task_id)}/revoke-credential`,
        t.map_index >= 0 ? { map_index: t.map_index } : {},
      ),
    onSettled: refresh,
  });
  if (run.isError) return <ErrorNote error={run.error} />;
  if (run.isPending) return <p>Loading…</p>;
  const { run: r, task_instances } = run.data;
  // A mapped task's node shows its indexes' state (Airflow's ranking); its row lists each index.
  const byTask = new Map<string, string[]>();
  for (const t of task_instances)
    byTask.set(t.task_id, [...(byTask.get(t.task_id) ?? []), t.state]);
  const states = Object.fromEntries([...byTask].map(([id, s]) => [id, summaryState(s)]));
  const taskLink = (t: { task_id: string; map_index: number }) =>
    `${base}/tasks/${enc(t.task_id)}${t.map_index >= 0 ? `?map_index=${t.map_index}` : ''}`;
  const base = `/dags/${enc(dagId)}/runs/${enc(runId)}`;
  return (
    <>
      <p className="crumbs">
        <Link to={`/dags/${enc(dagId)}`}>{dagId}</Link> /
      </p>
      <h1>
        Run {runId} <StateBadge state={r.state} />
      </h1>
      <p className="sub">
        {r.run_type} · started <Time iso={r.started_at} /> · ended <Time iso={r.ended_at} /> · conf{' '}
        <code>{JSON.stringify(r.conf)}</code>
      </p>
      {dag.data && (
        <Suspense fallback={<p>Loading graph…</p>}>
          <Graph
            tasks={dag.data.spec.tasks}
            groups={dag.data.spec.task_groups ?? []}
            states={states}
            hrefOf={(t) => `${base}/tasks/${enc(t)}`}
          />
        </Suspense>
      )}
      <h2>Gantt</h2>
      <Gantt
        taskInstances={task_instances}
        hrefOf={(t, i) => taskLink({ task_id: t, map_index: i ?? -1 })}
      />
      <h2>Tasks</h2>
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Task</th>
            <th scope="col">State</th>
            <th scope="col">Try</th>
            <th scope="col">Started</th>
            <th scope="col">Duration</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {task_instances.map((t) => (
            <tr key={`${t.task_id}[${t.map_index}]`}>
              <th scope="row">
                <Link to={taskLink(t)}>
                  {t.task_id}
                  {t.map_index >= 0 ? `[${t.map_index}]` : ''}
                </Link>
              </th>
              <td>
                <StateBadge state={t.state} />
              </td>
              <td>
                {t.try_number} / {t.max_tries}
              </td>
              <td>
                <Time iso={t.started_at} />
              </td>
              <td>{duration(t.started_at, t.ended_at)}</td>
              <td className="actions">
                {can('runs:clear') && (
                  <button
                    type="button"
                    disabled={clear.isPending || LIVE.includes(t.state)}
                    onClick={() => clear.mutate(t.task_id)}
                  >
                    Clear and rerun
                  </button>
                )}
                {can('credentials:revoke') && t.state === 'running' && (
                  <button
                    type="button"
                    className="danger"
                    disabled={revoke.isPending}
                    onClick={() => revoke.mutate(t)}
                  >
                    Revoke credential
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {clear.isError && <ErrorNote error={clear.error} />}
      {revoke.isError && <ErrorNote error={revoke.error} />}
      {revoke.isSuccess && (
        <p role="status">The attempt's credential is revoked: its next call is refused.</p>
      )}
    </>
  );
}
