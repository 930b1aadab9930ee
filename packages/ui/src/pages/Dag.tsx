import { useQueries, useQuery } from '@tanstack/react-query';
import { lazy, Suspense } from 'react';
import { Link, useParams } from 'react-router';
import { enc, get, type Dag as DagRow, type Reply, type Spec } from '../api';
import { Grid } from '../components/Grid';
import { useLive } from '../live';
import { useCan } from '../session';
import { ErrorNote } from './Layout';

export const Graph = lazy(() => import('../components/Graph'));
const GRID_RUNS = 25;

export function useDag(dagId: string) {
  return useQuery({
    queryKey: ['dag', dagId],
    queryFn: () => get<{ dag: DagRow; spec: Spec }>(`/api/v1/dags/${enc(dagId)}`),
  });
}

export function Dag() {
  const { dagId = '' } = useParams();
  const can = useCan();
  useLive({ dagId });
  const dag = useDag(dagId);
  const runs = useQuery({
    queryKey: ['runs', dagId],
    queryFn: () => get<Reply<'get_runs'>>(`/api/v1/runs?dag_id=${enc(dagId)}&limit=${GRID_RUNS}`),
  });
  const shown = [...(runs.data?.runs ?? [])].reverse();
  const tis = useQueries({
    queries: shown.map((r) => ({
      queryKey: ['run', dagId, r.run_id],
      queryFn: () =>
        get<Reply<'get_dags_by_dag_id_runs_by_run_id'>>(
          `/api/v1/dags/${enc(dagId)}/runs/${enc(r.run_id)}`,
        ),
    })),
  });
  if (dag.isError) return <ErrorNote error={dag.error} />;
  if (dag.isPending) return <p>Loading…</p>;
  const { spec } = dag.data;
  const instances = Object.fromEntries(
    shown.map((r, i) => [r.run_id, tis[i]?.data?.task_instances]),
  );
  return (
    <>
      <h1>{dagId}</h1>
      <p className="sub">
        {spec.description} · schedule <code>{spec.schedule ?? 'manual'}</code> (
        {spec.schedule_timezone}) · version {dag.data.dag.current_version}
        {dag.data.dag.is_paused ? ' · paused' : ''}
      </p>
      <div className="actions">
        <Link className="button" to={`/dags/${enc(dagId)}/versions`}>
          Versions
        </Link>
        {can('runs:trigger') && (
          <Link className="button" to={`/dags/${enc(dagId)}/trigger`}>
            Trigger…
          </Link>
        )}
      </div>
      <h2>Grid</h2>
      <Grid
        dagId={dagId}
        taskIds={spec.tasks.map((t) => t.task_id)}
        runs={shown}
        instances={instances}
      />
      <h2>Graph</h2>
      <Suspense fallback={<p>Loading graph…</p>}>
        <Graph tasks={spec.tasks} />
      </Suspense>
      <h2>Declared secrets</h2>
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Task</th>
            <th scope="col">Trigger rule</th>
            <th scope="col">Variables</th>
            <th scope="col">Connections</th>
          </tr>
        </thead>
        <tbody>
          {spec.tasks.map((t) => (
            <tr key={t.task_id}>
              <th scope="row">{t.task_id}</th>
              <td>{t.trigger_rule}</td>
              <td>{t.variables.join(', ') || '—'}</td>
              <td>{t.connections.join(', ') || '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
