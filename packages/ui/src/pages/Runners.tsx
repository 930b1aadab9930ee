import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, enc, get, type Reply, type Runner } from '../api';
import { DeleteButton } from '../components/DeleteButton';
import { Time } from '../components/Time';
import { runnerRegistration, type RunnerFormFields } from '../runner-input';
import { useCan } from '../session';
import { ErrorNote } from './Layout';

type Registered = Reply<'post_runners'>;
type Revealed = Reply<'post_runners_by_name_reveal_token'>;

function Labels({ labels }: { labels: Record<string, string> }) {
  const entries = Object.entries(labels);
  if (entries.length === 0) return <>—</>;
  return (
    <>
      {entries.map(([k, v]) => (
        <span key={k} className="chip">
          {k}={v}
        </span>
      ))}
    </>
  );
}

function sshTarget(r: Runner): string {
  return r.ssh ? `${r.ssh.user}@${r.ssh.host}:${r.ssh.port}` : 'connects through the door';
}

/**
 * The launch command (or, without a door URL, the bare token) with a copy button. The value
 * lives only in this component's props: leaving the page drops it, and no list or detail
 * request ever carries it again.
 */
function LaunchCommand({ command, token }: { command: string | null; token: string }) {
  const [copied, setCopied] = useState<'yes' | 'failed' | null>(null);
  const text = command ?? token;
  const copy = () =>
    navigator.clipboard.writeText(text).then(
      () => setCopied('yes'),
      () => setCopied('failed'),
    );
  return (
    <div className="launch">
      {command === null && (
        <p className="sub">
          This server has no door URL configured (`--door-port` / `--door-url`), so there is no
          launch command; this is the runner&apos;s token:
        </p>
      )}
      <pre aria-label={command === null ? 'Runner token' : 'Launch command'}>{text}</pre>
      <button type="button" onClick={() => void copy()}>
        {command === null ? 'Copy token' : 'Copy launch command'}
      </button>{' '}
      {copied !== null && (
        <span role="status">
          {copied === 'yes' ? 'Copied.' : 'The browser refused the clipboard: select and copy.'}
        </span>
      )}
    </div>
  );
}

/** What registration returned, shown once: an inbound runner's launch command, or the ssh target. */
function RegisteredNote({ done, onClose }: { done: Registered; onClose: () => void }) {
  const r = done.runner;
  return (
    <section className="form" aria-label={`Runner ${r.name} registered`}>
      <h2>Runner {r.name} registered</h2>
      {done.token !== null ? (
        <>
          <p>
            Run this on the machine; it is all the machine needs. It is shown once here (a role with
            runners:create can show it again from the runner&apos;s page, audited). The token is
            read from stdin, so it appears in no process listing.
          </p>
          <LaunchCommand command={done.launch_command} token={done.token} />
        </>
      ) : (
        <p>
          The cell dials <code>{sshTarget(r)}</code> with the key in Connection{' '}
          <code>{r.ssh?.credential}</code> and checks the pinned host key; the machine holds no
          Leoflow credential.
        </p>
      )}
      <div className="actions">
        <button type="button" onClick={onClose}>
          Done
        </button>
        <Link to={`/fleet/${enc(r.name)}`}>Open {r.name}</Link>
      </div>
    </section>
  );
}

const EMPTY_FORM: RunnerFormFields = {
  name: '',
  kind: 'inbound',
  labels: '',
  capacity: '1',
  host: '',
  port: '22',
  user: '',
  credential: '',
  host_key: '',
};

function RegisterForm({
  onRegistered,
  onCancel,
}: {
  onRegistered: (r: Registered) => void;
  onCancel: () => void;
}) {
  const can = useCan();
  const qc = useQueryClient();
  const [f, setF] = useState<RunnerFormFields>(EMPTY_FORM);
  const [problem, setProblem] = useState<string | null>(null);
  const connections = useQuery({
    queryKey: ['connections'],
    queryFn: () => get<Reply<'get_connections'>>('/api/v1/connections?limit=1000'),
    enabled: f.kind === 'ssh' && can('connections:read'),
  });
  const field = (k: keyof RunnerFormFields) => ({
    value: f[k],
    onChange: (e: { target: { value: string } }) => setF((x) => ({ ...x, [k]: e.target.value })),
  });
  const save = useMutation({
    mutationFn: (body: unknown) => api<Registered>('POST', '/api/v1/runners', body),
    onSuccess: (r) => {
      void qc.invalidateQueries({ queryKey: ['runners'] });
      onRegistered(r);
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const body = runnerRegistration(f);
    setProblem(typeof body === 'string' ? body : null);
    if (typeof body !== 'string') save.mutate(body);
  };
  const ids = connections.data?.connections.map((c) => c.conn_id) ?? [];
  return (
    <form className="form" onSubmit={submit} aria-label="Register a runner">
      <label>
        Name
        <input {...field('name')} required pattern="[a-z0-9][a-z0-9._\-]{0,62}" />
      </label>
      <label>
        Kind
        <select {...field('kind')}>
          <option value="inbound">inbound: the machine connects to the door</option>
          <option value="ssh">ssh: the cell dials the machine</option>
        </select>
      </label>
      <label>
        Labels (k=v, comma-separated)
        <input {...field('labels')} placeholder="gpu=a100,zone=lab" />
      </label>
      <label>
        Capacity (attempts at once)
        <input {...field('capacity')} inputMode="numeric" pattern="[0-9]{1,4}" />
      </label>
      {f.kind === 'ssh' && (
        <>
          <label>
            SSH host
            <input {...field('host')} required />
          </label>
          <label>
            SSH port
            <input {...field('port')} inputMode="numeric" pattern="[0-9]{1,5}" />
          </label>
          <label>
            SSH user
            <input {...field('user')} required autoComplete="off" />
          </label>
          <label>
            Credential (the Connection that holds the private key)
            {ids.length > 0 ? (
              <select {...field('credential')} required>
                <option value="">choose a Connection…</option>
                {ids.map((id) => (
                  <option key={id} value={id}>
                    {id}
                  </option>
                ))}
              </select>
            ) : (
              <input {...field('credential')} required />
            )}
          </label>
          <label>
            Host key (a known_hosts line from `ssh-keyscan`, or a SHA256: fingerprint from
            `ssh-keygen -lf`; pinned, never learned on first use)
            <textarea {...field('host_key')} rows={3} required spellCheck={false} />
          </label>
        </>
      )}
      {problem !== null && (
        <p className="error" role="alert">
          {problem}
        </p>
      )}
      <div className="actions">
        <button type="submit" disabled={save.isPending}>
          Register runner
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
      {save.isError && <ErrorNote error={save.error} />}
    </form>
  );
}

/** The tenant's runners; registering and deleting only for roles that hold the permission. */
export function Runners() {
  const can = useCan();
  const qc = useQueryClient();
  const [registering, setRegistering] = useState(false);
  const [registered, setRegistered] = useState<Registered | null>(null);
  const list = useQuery({
    queryKey: ['runners'],
    queryFn: () => get<Reply<'get_runners'>>('/api/v1/runners?limit=1000'),
  });
  const remove = useMutation({
    mutationFn: (name: string) => api('DELETE', `/api/v1/runners/${enc(name)}`),
    onSettled: () => qc.invalidateQueries({ queryKey: ['runners'] }),
  });
  if (list.isError) return <ErrorNote error={list.error} />;
  const creatable = can('runners:create');
  const deletable = can('runners:delete');
  return (
    <>
      <h1>Runners</h1>
      <p className="sub">
        External machines that run this tenant&apos;s task attempts (`executor: runner`).
      </p>
      {creatable && !registering && registered === null && (
        <div className="actions">
          <button type="button" onClick={() => setRegistering(true)}>
            Register runner
          </button>
        </div>
      )}
      {registering && (
        <RegisterForm
          onRegistered={(r) => {
            setRegistering(false);
            setRegistered(r);
          }}
          onCancel={() => setRegistering(false)}
        />
      )}
      {registered !== null && (
        <RegisteredNote done={registered} onClose={() => setRegistered(null)} />
      )}
      {list.data?.runners.length === 0 && (
        <p className="empty">
          No runners yet.{' '}
          {creatable
            ? 'Register one with “Register runner”, or `leoflow runners register <name> --kind inbound`.'
            : 'Someone with runners:create registers them (`leoflow runners register`).'}
        </p>
      )}
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Kind</th>
            <th scope="col">Labels</th>
            <th scope="col">Capacity</th>
            <th scope="col">Target</th>
            <th scope="col">Registered</th>
            {deletable && <th scope="col">Actions</th>}
          </tr>
        </thead>
        <tbody>
          {list.data?.runners.map((r) => (
            <tr key={r.id}>
              <th scope="row">
                <Link to={`/fleet/${enc(r.name)}`}>{r.name}</Link>
              </th>
              <td>{r.kind}</td>
              <td>
                <Labels labels={r.labels} />
              </td>
              <td>{r.capacity}</td>
              <td>{sshTarget(r)}</td>
              <td>
                <Time iso={r.created_at} /> by {r.created_by}
              </td>
              {deletable && (
                <td className="actions">
                  <DeleteButton name={r.name} onDelete={() => remove.mutate(r.name)} />
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {remove.isError && <ErrorNote error={remove.error} />}
    </>
  );
}

/** One runner. Its token is never fetched for display; showing it again is one audited request. */
export function RunnerDetail() {
  const { name = '' } = useParams();
  const can = useCan();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const remove = useMutation({
    mutationFn: () => api('DELETE', `/api/v1/runners/${enc(name)}`),
    onSuccess: () => {
      // Only the list refetches (exact), never the gone runner's own entry.
      void navigate('/fleet');
      qc.removeQueries({ queryKey: ['runners', name], exact: true });
      void qc.invalidateQueries({ queryKey: ['runners'], exact: true });
    },
  });
  // Once deleted, this page never fetches its runner again, though it renders once more before
  // the navigation away commits (react-router navigates in a transition; the mutation's own
  // re-render comes first): its entry is gone, and a re-created one would be fetched (a 404).
  const runner = useQuery({
    queryKey: ['runners', name],
    queryFn: () => get<Reply<'get_runners_by_name'>>(`/api/v1/runners/${enc(name)}`),
    enabled: !remove.isSuccess,
  });
  const [revealed, setRevealed] = useState<Revealed | null>(null);
  const reveal = useMutation({
    mutationFn: () => api<Revealed>('POST', `/api/v1/runners/${enc(name)}/reveal-token`, {}),
    onSuccess: setRevealed,
  });
  if (remove.isSuccess) return <p>Deleted {name}.</p>;
  if (runner.isError) return <ErrorNote error={runner.error} />;
  if (runner.isPending) return <p>Loading…</p>;
  const r = runner.data;
  return (
    <>
      <p className="crumbs">
        <Link to="/fleet">Runners</Link> /
      </p>
      <h1>{r.name}</h1>
      <dl className="facts">
        <dt>Kind</dt>
        <dd>{r.kind}</dd>
        <dt>Capacity</dt>
        <dd>{r.capacity} attempts at once</dd>
        <dt>Labels</dt>
        <dd>
          <Labels labels={r.labels} />
        </dd>
        <dt>Registered</dt>
        <dd>
          <Time iso={r.created_at} /> by {r.created_by}
        </dd>
        {r.ssh ? (
          <>
            <dt>SSH target</dt>
            <dd>
              <code>{sshTarget(r)}</code>
            </dd>
            <dt>Credential</dt>
            <dd>
              Connection <Link to="/connections">{r.ssh.credential}</Link> (the private key; the
              cell reads it from the vault when it dials)
            </dd>
            <dt>Pinned host key</dt>
            <dd>
              <code className="wrap">{r.ssh.host_key}</code>
            </dd>
          </>
        ) : (
          <>
            <dt>Token</dt>
            <dd>{r.has_token ? 'minted at registration; never shown in lists' : 'none'}</dd>
          </>
        )}
      </dl>
      <div className="actions">
        {can('runners:create') && r.has_token && revealed === null && (
          <button type="button" onClick={() => reveal.mutate()} disabled={reveal.isPending}>
            Show launch command (audited)
          </button>
        )}
        {revealed !== null && (
          <button type="button" onClick={() => setRevealed(null)}>
            Hide launch command
          </button>
        )}
        {can('runners:delete') && <DeleteButton name={r.name} onDelete={() => remove.mutate()} />}
      </div>
      {revealed !== null && (
        <LaunchCommand command={revealed.launch_command} token={revealed.token} />
      )}
      {can('runners:delete') && (
        <p className="sub">
          Deleting stops its token resolving at once and closes its live sessions; to rotate a
          token, delete the runner and register it again.
        </p>
      )}
      {reveal.isError && <ErrorNote error={reveal.error} />}
      {remove.isError && <ErrorNote error={remove.error} />}
    </>
  );
}
