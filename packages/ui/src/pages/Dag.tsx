import { useQuery } from '@tanstack/react-query';
import { lazy, Suspense } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import { enc, get, type Dag as DagRow, type Reply, type Spec } from '../api';
import { Grid } from '../components/Grid';
import { Time } from '../components/Time';
import { useLive } from '../live';
import { useCan } from '../session';
import { ErrorNote } from './Layout';

export const Graph = lazy(() => import('../components/Graph'));
const GRID_RUNS = 25;
/** the grid's width, from ?runs= (1–100, the route's limit), so a wider grid is a shareable URL */
function gridRuns(param: string | null): number {
  const n = Number(param ?? GRID_RUNS);
  return Number.isInteger(n) && n >= 1 && n <= 100 ? n : GRID_RUNS;
}

export function useDag(dagId: string) {
  return useQuery({
    queryKey: ['dag', dagId],
    queryFn: () => get<{ dag: DagRow; spec: Spec }>(`/api/v1/dags/${enc(dagId)}`),
  });
}

export function Dag() {
  const { dagId = '' } = useParams();
  const can = useCan();
  const [search] = useSearchParams();
  const width = gridRuns(search.get('runs'));
  useLive({ dagId });
  const dag = useDag(dagId);
  // One request for the whole grid, whatever the number of runs; live events refetch it.
  const grid = useQuery({
    queryKey: ['runs', dagId, 'grid', width],
    queryFn: () =>
      get<Reply<'get_dags_by_dag_id_grid'>>(`/api/v1/dags/${enc(dagId)}/grid?limit=${width}`),
  });
  const undeclared = useQuery({
    queryKey: ['undeclared', dagId],
    queryFn: () =>
      get<Reply<'get_secrets_undeclared_use'>>(
        `/api/v1/secrets/undeclared-use?dag_id=${enc(dagId)}`,
      ),
    enabled: can('audit:read'),
  });
  if (dag.isError) return <ErrorNote error={dag.error} />;
  if (dag.isPending) return <p>Loading…</p>;
  const { spec } = dag.data;
  const entries = [...(grid.data?.runs ?? [])].reverse();
  const shown = entries.map((e) => e.run);
  const instances = Object.fromEntries(entries.map((e) => [e.run.run_id, e.task_instances]));
  const unused = undeclared.data?.dags.find((d) => d.dag_id === dagId);
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
      {grid.isError && <ErrorNote error={grid.error} />}
      {grid.isPending ? (
        <p>Loading runs…</p>
      ) : (
        <Grid
          dagId={dagId}
          taskIds={spec.tasks.map((t) => t.task_id)}
          runs={shown}
          instances={instances}
        />
      )}
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
      {can('audit:read') && (
        <>
          <h2>Read without declaring</h2>
          {undeclared.isError && <ErrorNote error={undeclared.error} />}
          {undeclared.data &&
            (unused ? (
              <div data-testid="undeclared-use">
                <p className="sub">
                  Under <code>secret_scoping=permissive</code> these tasks read names they did not
                  declare ({unused.attempts} attempts, last <Time iso={unused.last_seen} />
                  ). Declare them before switching to <code>enforce</code>, or those reads will be
                  refused.
                </p>
                <p>
                  Variables: {unused.variables.join(', ') || '—'} · Connections:{' '}
                  {unused.connections.join(', ') || '—'}
                </p>
              </div>
            ) : (
              <p className="empty">
                No undeclared reads recorded: switching this DAG to{' '}
                <code>secret_scoping=enforce</code> would refuse nothing it reads today.
              </p>
            ))}
        </>
      )}
    </>
  );
}
