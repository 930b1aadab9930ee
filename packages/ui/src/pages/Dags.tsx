import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { nextFireAfter } from '@leoflow/core/timetable';
import { useState } from 'react';
import { Link } from 'react-router';
import { api, enc, get, type Dag, type Reply, type Run, type Spec } from '../api';
import { Time } from '../components/Time';
import { stateClass } from '../format';
import { useLive } from '../live';
import { useCan } from '../session';
import { ImportErrorsBanner } from './ImportErrors';
import { ErrorNote } from './Layout';

export function Dags() {
  const can = useCan();
  const [search, setSearch] = useState('');
  useLive({});
  const dags = useQuery({
    queryKey: ['dags'],
    queryFn: () => get<Reply<'get_dags'>>('/api/v1/dags?limit=1000'),
  });
  // One call for every DAG's recent runs (newest first), grouped below.
  const runs = useQuery({
    queryKey: ['runs', 'all'],
    queryFn: () => get<Reply<'get_runs'>>('/api/v1/runs?limit=500'),
  });
  if (dags.isError) return <ErrorNote error={dags.error} />;
  const byDag = new Map<string, Run[]>();
  for (const r of runs.data?.runs ?? []) {
    const list = byDag.get(r.dag_id) ?? [];
    if (list.length < 5) list.push(r);
    byDag.set(r.dag_id, list);
  }
  const q = search.trim().toLowerCase();
  const shown = (dags.data?.dags ?? []).filter((d) => d.dag_id.toLowerCase().includes(q));
  return (
    <>
      <h1>DAGs</h1>
      <ImportErrorsBanner />
      <label className="search">
        <span>Search</span>
        <input
          type="search"
          value={search}
          onChange={(e) => setSearch(e.target.value)}
          placeholder="DAG id"
        />
      </label>
      {dags.isPending ? (
        <p>Loading…</p>
      ) : shown.length === 0 ? (
        <p className="empty">
          {q
            ? 'No DAG matches: clear the search or try part of the id.'
            : 'No DAGs yet: push one with `leoflow dags push <dir>` or start standalone with --dags-folder.'}
        </p>
      ) : (
        <table className="list">
          <thead>
            <tr>
              <th scope="col">DAG</th>
              <th scope="col">Active</th>
              <th scope="col">Schedule</th>
              <th scope="col">Next run</th>
              <th scope="col">Last runs (newest first)</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((d) => (
              <DagRow
                key={d.dag_id}
                dag={d}
                runs={byDag.get(d.dag_id) ?? []}
                canPause={can('dags:pause')}
              />
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function DagRow({ dag, runs, canPause }: { dag: Dag; runs: Run[]; canPause: boolean }) {
  const qc = useQueryClient();
  const detail = useQuery({
    queryKey: ['dag', dag.dag_id],
    queryFn: () => get<{ dag: Dag; spec: Spec }>(`/api/v1/dags/${enc(dag.dag_id)}`),
  });
  const pause = useMutation({
    mutationFn: (paused: boolean) =>
      api('PATCH', `/api/v1/dags/${enc(dag.dag_id)}`, { is_paused: paused }),
    onSettled: () => qc.invalidateQueries({ queryKey: ['dags'] }),
  });
  const spec = detail.data?.spec;
  let next: string | null = null;
  if (spec && !dag.is_paused) {
    try {
      const at = nextFireAfter(spec.schedule, spec.schedule_timezone, Date.now());
      next = at === null ? null : new Date(at).toISOString();
    } catch {
      next = null;
    }
  }
  return (
    <tr>
      <th scope="row">
        <Link to={`/dags/${enc(dag.dag_id)}`}>{dag.dag_id}</Link>
        {spec?.description && <div className="sub">{spec.description}</div>}
        {!dag.is_active && (
          <div className="sub">
            its file is gone from the DAGs folder: no scheduled run until it is back
          </div>
        )}
      </th>
      <td>
        <input
          type="checkbox"
          role="switch"
          aria-label={`${dag.dag_id} active (unpaused)`}
          checked={!dag.is_paused}
          disabled={!canPause || pause.isPending}
          title={canPause ? 'pause or unpause' : 'your role may not pause DAGs'}
          onChange={(e) => pause.mutate(!e.target.checked)}
        />
      </td>
      <td>
        {spec ? (
          <>
            <code>{spec.schedule ?? 'manual'}</code>{' '}
            <span className="sub">{spec.schedule_timezone}</span>
          </>
        ) : (
          '…'
        )}
      </td>
      <td>{dag.is_paused ? 'paused' : <Time iso={next} />}</td>
      <td>
        {runs.length === 0
          ? 'none'
          : runs.map((r) => (
              <Link
                key={r.run_id}
                to={`/dags/${enc(dag.dag_id)}/runs/${enc(r.run_id)}`}
                className={`dot ${stateClass(r.state)}`}
                title={`${r.run_id}: ${r.state}`}
                aria-label={`run ${r.run_id}: ${r.state}`}
              />
            ))}
      </td>
    </tr>
  );
}
