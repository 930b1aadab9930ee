import { useQuery } from '@tanstack/react-query';
import { get, type Reply } from '../api';
import { Time } from '../components/Time';
import { useCan } from '../session';
import { ErrorNote } from './Layout';

interface Exposure {
  id: string;
  sentence: string;
  remedy: string;
}

function Denied({ what }: { what: string }) {
  return (
    <p className="empty">
      Your role may not read {what}. Ask a platform admin, or sign in with a token whose role has
      the permission.
    </p>
  );
}

/** The doctor's posture: each residual exposure with its fix, then the health checks. */
export function Doctor() {
  const can = useCan();
  const report = useQuery({
    queryKey: ['doctor'],
    queryFn: () => get<Reply<'get_doctor'>>('/api/v1/doctor'),
    enabled: can('doctor:read'),
  });
  if (!can('doctor:read')) return <Denied what="the doctor report" />;
  if (report.isError) return <ErrorNote error={report.error} />;
  if (report.isPending) return <p>Loading…</p>;
  const { posture, checks, summary, edition } = report.data;
  const exposures = (posture.exposures ?? []) as Exposure[];
  const modes = ['secret_scoping', 'secret_liveness_mode', 'attempt_token_ttl'] as const;
  return (
    <>
      <h1>Doctor</h1>
      <p className="sub">
        {edition} · {summary.ok} ok · {summary.warn} warn · {summary.fail} fail ·{' '}
        {modes.map((m) => `${m} ${typeof posture[m] === 'string' ? posture[m] : '—'}`).join(' · ')}
      </p>
      <h2>Residual exposures</h2>
      {exposures.length === 0 ? (
        <p className="empty">No residual exposure: nothing to fix.</p>
      ) : (
        <table className="list">
          <thead>
            <tr>
              <th scope="col">Exposure</th>
              <th scope="col">What it means</th>
              <th scope="col">Fix</th>
            </tr>
          </thead>
          <tbody>
            {exposures.map((e) => (
              <tr key={e.id}>
                <th scope="row">
                  <code>{e.id}</code>
                </th>
                <td>{e.sentence}</td>
                <td>{e.remedy}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Checks</h2>
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Check</th>
            <th scope="col">Status</th>
            <th scope="col">Message</th>
          </tr>
        </thead>
        <tbody>
          {checks.map((c) => (
            <tr key={c.id}>
              <th scope="row">
                <code>{c.id}</code>
              </th>
              <td className={c.status === 'ok' ? 'ok' : 'error'}>{c.status}</td>
              <td>{c.message}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

export function Tenants() {
  const can = useCan();
  const list = useQuery({
    queryKey: ['tenants'],
    queryFn: () => get<Reply<'get_tenants'>>('/api/v1/tenants?limit=1000'),
    enabled: can('tenants:admin'),
  });
  if (!can('tenants:admin')) return <Denied what="the tenants" />;
  if (list.isError) return <ErrorNote error={list.error} />;
  if (list.isPending) return <p>Loading…</p>;
  return (
    <>
      <h1>Tenants</h1>
      <p className="sub">
        Create a tenant and its first token with <code>leoflow tenants create</code>.
      </p>
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Id</th>
            <th scope="col">Name</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {list.data.tenants.map((t) => (
            <tr key={t.id}>
              <th scope="row">{t.id}</th>
              <td>{t.name}</td>
              <td>
                <Time iso={t.created_at} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
