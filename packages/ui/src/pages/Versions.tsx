import { useQuery } from '@tanstack/react-query';
import { Link, useParams, useSearchParams } from 'react-router';
import { enc, get, type Reply } from '../api';
import { Time } from '../components/Time';
import { lineDiff } from '../diff';
import { ErrorNote } from './Layout';

type VersionReply = Reply<'get_dags_by_dag_id_versions_by_version'>;

/** A DAG's versions, and the diff of two of them (default: the newest against the one before). */
export function Versions() {
  const { dagId = '' } = useParams();
  const [search, setSearch] = useSearchParams();
  const list = useQuery({
    queryKey: ['versions', dagId],
    queryFn: () => get<Reply<'get_dags_by_dag_id_versions'>>(`/api/v1/dags/${enc(dagId)}/versions`),
  });
  const versions = [...(list.data?.versions ?? [])].sort((x, y) => y.version - x.version);
  const to = Number(search.get('to') ?? '') || versions[0]?.version || 0;
  const from =
    Number(search.get('from') ?? '') || versions.find((v) => v.version < to)?.version || 0;
  const spec = (v: number) => ({
    queryKey: ['version', dagId, v],
    queryFn: () => get<VersionReply>(`/api/v1/dags/${enc(dagId)}/versions/${v}`),
    enabled: v > 0,
  });
  const a = useQuery(spec(from));
  const b = useQuery(spec(to));
  if (list.isError) return <ErrorNote error={list.error} />;
  const lines = (r: VersionReply | undefined) =>
    r ? JSON.stringify(r.spec, null, 2).split('\n') : [];
  const diff = a.data && b.data ? lineDiff(lines(a.data), lines(b.data)) : [];
  const changed = diff.filter((d) => d.op !== ' ').length;
  const pick = (name: 'from' | 'to') => (
    <label>
      <span>{name === 'from' ? 'Compare' : 'with'}</span>{' '}
      <select
        value={name === 'from' ? from : to}
        onChange={(e) =>
          setSearch({
            from: String(name === 'from' ? e.target.value : from),
            to: String(name === 'to' ? e.target.value : to),
          })
        }
      >
        {versions.map((v) => (
          <option key={v.version} value={v.version}>
            version {v.version}
          </option>
        ))}
      </select>
    </label>
  );
  return (
    <>
      <p className="crumbs">
        <Link to={`/dags/${enc(dagId)}`}>{dagId}</Link> /
      </p>
      <h1>Versions of {dagId}</h1>
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">Registered</th>
            <th scope="col">Spec hash</th>
          </tr>
        </thead>
        <tbody>
          {versions.map((v) => (
            <tr key={v.version}>
              <th scope="row">{v.version}</th>
              <td>
                <Time iso={v.created_at} />
              </td>
              <td>
                <code>{v.spec_hash.slice(0, 16)}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {versions.length < 2 ? (
        <p className="empty">Only one version so far: push a changed DAG to see a diff.</p>
      ) : (
        <>
          <h2>Diff</h2>
          <div className="actions">
            {pick('from')}
            {pick('to')}
          </div>
          <p className="sub">{changed === 0 ? 'No difference.' : `${changed} changed lines.`}</p>
          <pre className="diff" aria-label={`diff of version ${from} and version ${to}`}>
            {diff.map((d, i) => (
              <div key={i} className={d.op === '+' ? 'add' : d.op === '-' ? 'del' : ''}>
                {d.op} {d.text}
              </div>
            ))}
          </pre>
        </>
      )}
    </>
  );
}
