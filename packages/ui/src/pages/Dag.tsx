import { useQueries, useQuery } from '@tanstack/react-query';
import {
  declaredUnion,
  effectiveDeclaration,
  type DeclarationSource,
} from '@leoflow/core/declared-set';
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
          tasks={spec.tasks}
          groups={spec.task_groups ?? []}
          runs={shown}
          instances={instances}
        />
      )}
      <h2>Graph</h2>
      <Suspense fallback={<p>Loading graph…</p>}>
        <Graph tasks={spec.tasks} groups={spec.task_groups ?? []} />
      </Suspense>
      <DeclaredSecrets dagId={dagId} spec={spec} />
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

const FROM: Record<DeclarationSource, string> = {
  task: "the task's own list",
  dag: "the DAG's list",
  none: 'nothing declared',
};

/** One kind of a task's effective declaration: the names, and which list they come from. */
function Declared({ names, from }: { names: string[]; from: DeclarationSource }) {
  return (
    <>
      {names.join(', ') || '—'} <span className="sub">({FROM[from]})</span>
    </>
  );
}

function grantsText(grants: readonly string[] | null | undefined): string {
  if (grants === undefined) return '…';
  if (grants === null) return 'every DAG';
  return grants.length === 0 ? 'no DAG' : grants.join(', ');
}

/**
 * What each task is delivered (issue 34): the task's own list when it has one, else the DAG's —
 * computed by the function secret delivery runs (@leoflow/core/declared-set), saying which list
 * applies — and the grants of every declared secret: which DAGs may declare it, and whether they
 * name this one.
 */
export function DeclaredSecrets({ dagId, spec }: { dagId: string; spec: Spec }) {
  const can = useCan();
  const declared = (['variables', 'connections'] as const).flatMap((kind) =>
    declaredUnion(spec, kind).map((name) => ({ kind, name })),
  );
  const grants = useQueries({
    queries: declared.map(({ kind, name }) => ({
      queryKey: ['grants', kind, name],
      queryFn: () =>
        get<Reply<'get_variables_by_key_grants'>>(`/api/v1/${kind}/${enc(name)}/grants`),
      enabled: can(kind === 'variables' ? 'variables:read' : 'connections:read'),
    })),
  });
  return (
    <>
      <h2>Declared secrets</h2>
      <p className="sub">
        Each task receives its own <code>variables:</code> / <code>connections:</code> list when it
        has one, else the DAG&apos;s — exactly as delivery computes it.
      </p>
      <table className="list" data-testid="declared-secrets">
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
              <td>
                <Declared {...effectiveDeclaration(spec, t.task_id, 'variables')} />
              </td>
              <td>
                <Declared {...effectiveDeclaration(spec, t.task_id, 'connections')} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {declared.length > 0 && (
        <>
          <h3>Grants of the declared secrets</h3>
          <table className="list" data-testid="declared-grants">
            <thead>
              <tr>
                <th scope="col">Secret</th>
                <th scope="col">Kind</th>
                <th scope="col">May be declared by</th>
                <th scope="col">This DAG</th>
              </tr>
            </thead>
            <tbody>
              {declared.map(({ kind, name }, i) => {
                const g = grants[i];
                const mine = g?.data?.declared_by.find((d) => d.dag_id === dagId);
                return (
                  <tr key={`${kind}/${name}`}>
                    <th scope="row">{name}</th>
                    <td>{kind === 'variables' ? 'Variable' : 'Connection'}</td>
                    <td>{g?.isError ? 'unreadable' : grantsText(g?.data?.grants)}</td>
                    <td className={mine && !mine.granted ? 'error' : undefined}>
                      {mine === undefined
                        ? '…'
                        : mine.granted
                          ? 'granted'
                          : 'not granted: its tasks fail with LF_SECRET_NOT_GRANTED'}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
