import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Suspense } from 'react';
import { Link, useParams } from 'react-router';
import { api, enc, get, type Reply } from '../api';
import { Gantt } from '../components/Gantt';
import { StateBadge } from '../components/StateBadge';
import { Time } from '../components/Time';
import { duration } from '../format';
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
    mutationFn: (taskId: string) =>
      api(
        'POST',
        `/api/v1/dags/${enc(dagId)}/runs/${enc(runId)}/tasks/${enc(taskId)}/revoke-credential`,
        {},
      ),
    onSettled: refresh,
  });
  if (run.isError) return <ErrorNote error={run.error} />;
  if (run.isPending) return <p>Loading…</p>;
  const { run: r, task_instances } = run.data;
  const states = Object.fromEntries(task_instances.map((t) => [t.task_id, t.state]));
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
            states={states}
            hrefOf={(t) => `${base}/tasks/${enc(t)}`}
          />
        </Suspense>
      )}
      <h2>Gantt</h2>
      <Gantt taskInstances={task_instances} hrefOf={(t) => `${base}/tasks/${enc(t)}`} />
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
            <tr key={t.task_id}>
              <th scope="row">
                <Link to={`${base}/tasks/${enc(t.task_id)}`}>{t.task_id}</Link>
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
                    onClick={() => revoke.mutate(t.task_id)}
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
