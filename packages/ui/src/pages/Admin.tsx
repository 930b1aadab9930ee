import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, enc, get, type Reply } from '../api';
import { Time } from '../components/Time';
import { useCan } from '../session';
import { ErrorNote } from './Layout';

export function Tokens() {
  const can = useCan();
  const qc = useQueryClient();
  const list = useQuery({
    queryKey: ['tokens'],
    queryFn: () => get<Reply<'get_tokens'>>('/api/v1/tokens?limit=1000'),
  });
  const revoke = useMutation({
    mutationFn: (jti: string) => api('DELETE', `/api/v1/tokens/${enc(jti)}`),
    onSettled: () => qc.invalidateQueries({ queryKey: ['tokens'] }),
  });
  if (list.isError) return <ErrorNote error={list.error} />;
  return (
    <>
      <h1>API tokens</h1>
      <p className="sub">
        Mint tokens with `leoflow auth create-token` (the token is shown once, there).
      </p>
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Role</th>
            <th scope="col">Created</th>
            <th scope="col">Expires</th>
            <th scope="col">Status</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.tokens.map((t) => (
            <tr key={t.id}>
              <th scope="row">{t.name}</th>
              <td>{t.role}</td>
              <td>
                <Time iso={t.created_at} /> by {t.created_by}
              </td>
              <td>{t.expires_at ? <Time iso={t.expires_at} /> : 'never'}</td>
              <td>
                {t.revoked_at ? (
                  <>
                    revoked <Time iso={t.revoked_at} />
                  </>
                ) : (
                  'active'
                )}
              </td>
              <td>
                {can('tokens:revoke') && !t.revoked_at && (
                  <button type="button" className="danger" onClick={() => revoke.mutate(t.id)}>
                    Revoke
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {revoke.isError && <ErrorNote error={revoke.error} />}
    </>
  );
}

export function Audit() {
  const [action, setAction] = useState('');
  const list = useQuery({
    queryKey: ['audit', action],
    queryFn: () =>
      get<Reply<'get_audit'>>(`/api/v1/audit?limit=200${action ? `&action=${enc(action)}` : ''}`),
  });
  return (
    <>
      <h1>Audit log</h1>
      <label className="search">
        <span>Action</span>
        <input
          value={action}
          onChange={(e) => setAction(e.target.value.trim())}
          placeholder="e.g. run.trigger"
        />
      </label>
      {list.isError && <ErrorNote error={list.error} />}
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Actor</th>
            <th scope="col">Action</th>
            <th scope="col">Resource</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.events.map((e, i) => (
            <tr key={`${e.at}-${i}`}>
              <td>
                <Time iso={e.at} />
              </td>
              <td>{e.actor}</td>
              <td>{e.action}</td>
              <td>
                {e.resource_type} {e.resource_id}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
