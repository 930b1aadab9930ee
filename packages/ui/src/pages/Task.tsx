import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import { enc, get, type LogLine, type Reply } from '../api';
import { Delivery } from '../components/Delivery';
import { StateBadge } from '../components/StateBadge';
import { Time } from '../components/Time';
import { duration } from '../format';
import { useLive } from '../live';
import { useCan } from '../session';
import { ErrorNote } from './Layout';

export function Task() {
  const { dagId = '', runId = '', taskId = '' } = useParams();
  const [search, setSearch] = useSearchParams();
  const can = useCan();
  const base = `/api/v1/dags/${enc(dagId)}/runs/${enc(runId)}/tasks/${enc(taskId)}`;
  // A mapped task's instance is named by its map index (?map_index=N), as in the REST API.
  const mapParam = search.get('map_index');
  const mapIndex = mapParam !== null && /^\d+$/.test(mapParam) ? Number(mapParam) : undefined;
  const mq = mapIndex !== undefined ? `map_index=${mapIndex}` : '';
  const withMap = (path: string) => (mq ? `${path}${path.includes('?') ? '&' : '?'}${mq}` : path);
  const mapped = useQuery({
    queryKey: ['run', dagId, runId, 'mapped', taskId],
    queryFn: () =>
      get<Reply<'get_dags_by_dag_id_runs_by_run_id_tasks_by_task_id_mapped'>>(`${base}/mapped`),
  });
  const indexes = (mapped.data?.task_instances ?? []).filter((x) => x.map_index >= 0);
  const ti = useQuery({
    queryKey: ['run', dagId, runId, 'task', taskId, mapIndex],
    queryFn: () => get<Reply<'get_dags_by_dag_id_runs_by_run_id_tasks_by_task_id'>>(withMap(base)),
    // a mapped task without a chosen index: the page lists its indexes instead
    enabled: mapIndex !== undefined || (mapped.isSuccess && indexes.length === 0),
  });
  const xcom = useQuery({
    queryKey: ['run', dagId, runId, 'xcom', taskId, mapIndex],
    queryFn: () =>
      get<Reply<'get_dags_by_dag_id_runs_by_run_id_tasks_by_task_id_xcom'>>(
        withMap(`${base}/xcom`),
      ),
    enabled: can('xcom:read') && ti.isSuccess,
  });
  const delivery = useQuery({
    queryKey: ['run', dagId, runId, 'delivery', taskId, mapIndex],
    queryFn: () =>
      get<Reply<'get_dags_by_dag_id_runs_by_run_id_tasks_by_task_id_delivery'>>(
        withMap(`${base}/delivery`),
      ),
    enabled: can('runs:read') && ti.isSuccess,
  });
  const current = ti.data?.task_instance.try_number ?? 0;
  const chosen = Number(search.get('try') ?? '') || current;
  const [log, setLog] = useState<{ tryNumber: number; lines: LogLine[]; ended: boolean }>({
    tryNumber: 0,
    lines: [],
    ended: false,
  });
  useEffect(() => setLog({ tryNumber: chosen, lines: [], ended: false }), [chosen]);
  useLive({
    dagId,
    ...(chosen > 0 && can('logs:read')
      ? {
          follow: {
            dagId,
            runId,
            taskId,
            tryNumber: chosen,
            ...(mapIndex !== undefined ? { mapIndex } : {}),
          },
        }
      : {}),
    // A reconnected stream starts the try's log over: keep only lines not shown yet.
    onLog: (tryNumber, lines) =>
      setLog((l) => {
        if (l.tryNumber !== tryNumber) return l;
        const last = l.lines[l.lines.length - 1]?.line_number ?? 0;
        return { ...l, lines: [...l.lines, ...lines.filter((x) => x.line_number > last)] };
      }),
    onLogEnd: (tryNumber) => setLog((l) => (l.tryNumber === tryNumber ? { ...l, ended: true } : l)),
  });
  const logEnd = useRef<HTMLDivElement>(null);
  useEffect(() => logEnd.current?.scrollIntoView?.({ block: 'nearest' }), [log.lines.length]);

  const crumbs = (
    <p className="crumbs">
      <Link to={`/dags/${enc(dagId)}`}>{dagId}</Link> /{' '}
      <Link to={`/dags/${enc(dagId)}/runs/${enc(runId)}`}>{runId}</Link> /
    </p>
  );
  const indexList = indexes.length > 0 && (
    <>
      <h2>Map indexes</h2>
      <table className="list" aria-label={`map indexes of ${taskId}`}>
        <thead>
          <tr>
            <th scope="col">Index</th>
            <th scope="col">State</th>
            <th scope="col">Try</th>
            <th scope="col">Arguments</th>
          </tr>
        </thead>
        <tbody>
          {indexes.map((x) => (
            <tr key={x.map_index} aria-current={x.map_index === mapIndex ? 'true' : undefined}>
              <th scope="row">
                <button
                  type="button"
                  className="link"
                  onClick={() => setSearch({ map_index: String(x.map_index) })}
                >
                  [{x.map_index}]
                </button>
              </th>
              <td>
                <StateBadge state={x.state} />
              </td>
              <td>{x.try_number}</td>
              <td>
                <code>
                  {Object.entries(x.map_value ?? {})
                    .map(([k, v]) => `${k}=${v}`)
                    .join(' ')}
                </code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
  if (mapIndex === undefined && indexes.length > 0) {
    return (
      <>
        {crumbs}
        <h1>
          {taskId} <span className="sub">mapped into {indexes.length} task instances</span>
        </h1>
        {indexList}
      </>
    );
  }
  if (ti.isError) return <ErrorNote error={ti.error} />;
  if (ti.isPending) return <p>Loading…</p>;
  const t = ti.data.task_instance;
  const tries = [
    ...ti.data.history,
    {
      try_number: t.try_number,
      state: t.state,
      started_at: t.started_at,
      ended_at: t.ended_at,
      exit_code: t.exit_code,
      error_message: t.error_message,
    },
  ];
  return (
    <>
      {crumbs}
      <h1>
        {taskId}
        {t.map_index >= 0 ? `[${t.map_index}]` : ''} <StateBadge state={t.state} />
      </h1>
      <p className="sub">
        try {t.try_number} of {t.max_tries} · host {t.hostname ?? '—'} · last heartbeat{' '}
        <Time iso={t.last_heartbeat_at} />
        {t.retry_at && (
          <>
            {' '}
            · retries at <Time iso={t.retry_at} />
          </>
        )}
      </p>
      {t.error_message && <p className="error">{t.error_message}</p>}
      {t.decision && (
        <p className="sub">
          decision: followed {t.decision.followed.join(', ') || 'nothing'}; skipped{' '}
          {t.decision.skipped.join(', ') || 'nothing'}
        </p>
      )}
      {indexList}
      <h2>Attempts</h2>
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Try</th>
            <th scope="col">State</th>
            <th scope="col">Started</th>
            <th scope="col">Duration</th>
            <th scope="col">Exit</th>
            <th scope="col">Error</th>
          </tr>
        </thead>
        <tbody>
          {tries.map((h) => (
            <tr key={h.try_number} aria-current={h.try_number === chosen ? 'true' : undefined}>
              <th scope="row">
                <button
                  type="button"
                  className="link"
                  onClick={() =>
                    setSearch({
                      try: String(h.try_number),
                      ...(mapIndex !== undefined ? { map_index: String(mapIndex) } : {}),
                    })
                  }
                >
                  try {h.try_number}
                </button>
              </th>
              <td>
                <StateBadge state={h.state} />
              </td>
              <td>
                <Time iso={h.started_at} />
              </td>
              <td>{duration(h.started_at, h.ended_at)}</td>
              <td>{h.exit_code ?? '—'}</td>
              <td>{h.error_message ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {can('runs:read') && (
        <>
          <h2>Delivery record of try {chosen}</h2>
          {delivery.isError && <ErrorNote error={delivery.error} />}
          {delivery.data &&
            (() => {
              const rec = delivery.data.attempts.find((a) => a.try_number === chosen);
              return rec ? (
                <Delivery record={rec} />
              ) : (
                <p className="empty">
                  No delivery record for this try: it never registered with the server (it has not
                  started, or it failed before its first call).
                </p>
              );
            })()}
        </>
      )}
      {can('logs:read') && (
        <>
          <h2>
            Log of try {chosen}{' '}
            {!log.ended && t.try_number === chosen && ['queued', 'running'].includes(t.state)
              ? '(following)'
              : ''}
          </h2>
          <div className="log" role="log" aria-label={`log of try ${chosen}`} tabIndex={0}>
            {log.lines.length === 0 ? (
              <span className="sub">
                {log.ended ? 'This try wrote no log lines.' : 'Waiting for log lines…'}
              </span>
            ) : (
              log.lines.map((l) => (
                <div
                  key={l.line_number}
                  className={`line ${l.stream === 'stderr' ? 'stderr' : ''}`}
                >
                  <span className="ln">{l.line_number}</span> {l.message}
                </div>
              ))
            )}
            <div ref={logEnd} />
          </div>
        </>
      )}
      {can('xcom:read') && (
        <>
          <h2>XCom</h2>
          {xcom.data && xcom.data.xcom.length === 0 && <p className="empty">No XCom values.</p>}
          {xcom.data?.xcom.map((x) => (
            <div key={x.key} className="xcom">
              <div className="sub">
                {x.key} · {x.content_type} · {x.size_bytes} bytes · <Time iso={x.created_at} />
              </div>
              <pre>{x.value}</pre>
            </div>
          ))}
        </>
      )}
      <p className="sub">Duration of this try: {duration(t.started_at, t.ended_at)}</p>
    </>
  );
}
