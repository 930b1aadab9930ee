import { useMutation, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, enc, get, type Reply } from '../api';
import { Time } from '../components/Time';
import { useCan } from '../session';
import { ErrorNote } from './Layout';

const MASK = '••••••••';

/**
 * Secret values are never fetched for display: the list carries masked values, and a reveal is
 * one explicit request per value (audited by the server), shown only to roles that hold the
 * reveal permission.
 */
export function Variables() {
  const can = useCan();
  const list = useQuery({
    queryKey: ['variables'],
    queryFn: () => get<Reply<'get_variables'>>('/api/v1/variables?limit=1000'),
  });
  const [shown, setShown] = useState<Record<string, string>>({});
  const reveal = useMutation({
    mutationFn: (key: string) =>
      get<Reply<'get_variables_by_key'>>(`/api/v1/variables/${enc(key)}?reveal=true`),
    onSuccess: (v) => setShown((s) => ({ ...s, [v.key]: String(v.value) })),
  });
  if (list.isError) return <ErrorNote error={list.error} />;
  return (
    <>
      <h1>Variables</h1>
      {list.data?.variables.length === 0 && (
        <p className="empty">No Variables. Set one with `leoflow variables set`.</p>
      )}
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col">Value</th>
            <th scope="col">Description</th>
            <th scope="col">Updated</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.variables.map((v) => (
            <tr key={v.key}>
              <th scope="row">{v.key}</th>
              <td>
                {v.masked ? (
                  <>
                    <code>{shown[v.key] ?? MASK}</code>{' '}
                    {can('variables:reveal') && shown[v.key] === undefined && (
                      <button type="button" onClick={() => reveal.mutate(v.key)}>
                        Reveal
                      </button>
                    )}
                    {shown[v.key] !== undefined && (
                      <button
                        type="button"
                        onClick={() => setShown(({ [v.key]: _gone, ...rest }) => rest)}
                      >
                        Hide
                      </button>
                    )}
                  </>
                ) : (
                  <code>{String(v.value)}</code>
                )}
              </td>
              <td>{v.description}</td>
              <td>
                <Time iso={v.updated_at} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {reveal.isError && <ErrorNote error={reveal.error} />}
    </>
  );
}

export function Connections() {
  const can = useCan();
  const list = useQuery({
    queryKey: ['connections'],
    queryFn: () => get<Reply<'get_connections'>>('/api/v1/connections?limit=1000'),
  });
  const [shown, setShown] = useState<Record<string, string>>({});
  const reveal = useMutation({
    mutationFn: (id: string) =>
      api<Reply<'post_connections_by_id_reveal'>>(
        'POST',
        `/api/v1/connections/${enc(id)}/reveal`,
        {},
      ),
    onSuccess: (c) => setShown((s) => ({ ...s, [c.conn_id]: c.connection.password ?? '(none)' })),
  });
  const test = useMutation({
    mutationFn: (id: string) =>
      api<Record<string, unknown>>('POST', `/api/v1/connections/${enc(id)}/test`, {}),
  });
  if (list.isError) return <ErrorNote error={list.error} />;
  return (
    <>
      <h1>Connections</h1>
      {list.data?.connections.length === 0 && (
        <p className="empty">No Connections. Add one with `leoflow connections add`.</p>
      )}
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Id</th>
            <th scope="col">Type</th>
            <th scope="col">Host</th>
            <th scope="col">Login</th>
            <th scope="col">Password</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.connections.map((c) => (
            <tr key={c.conn_id}>
              <th scope="row">{c.conn_id}</th>
              <td>{c.conn_type}</td>
              <td>{c.host ?? '—'}</td>
              <td>{c.login ?? '—'}</td>
              <td>{c.has_password ? <code>{shown[c.conn_id] ?? MASK}</code> : '—'}</td>
              <td className="actions">
                {can('connections:reveal') && c.has_password && shown[c.conn_id] === undefined && (
                  <button type="button" onClick={() => reveal.mutate(c.conn_id)}>
                    Reveal
                  </button>
                )}
                {can('connections:test') && (
                  <button type="button" onClick={() => test.mutate(c.conn_id)}>
                    Test
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {test.data && <pre role="status">{JSON.stringify(test.data, null, 2)}</pre>}
      {test.isError && <ErrorNote error={test.error} />}
      {reveal.isError && <ErrorNote error={reveal.error} />}
    </>
  );
}
