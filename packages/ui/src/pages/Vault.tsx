import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, enc, get, type Reply } from '../api';
import {
  connectionsAsAirflowJson,
  connectionsWithoutSecrets,
  downloadJson,
  importEach,
  variablesWithoutSecrets,
  type ImportOutcome,
} from '../transfer';
import { DeleteButton } from '../components/DeleteButton';
import { Time } from '../components/Time';
import { useCan } from '../session';
import { ErrorNote } from './Layout';

const MASK = '••••••••';

/**
 * Set a Variable. Editing never pre-fills the value (the page does not hold it): the form
 * replaces it.
 */
function VariableForm({
  initial,
  onDone,
}: {
  initial?: { key: string; description: string; masked: boolean };
  onDone: () => void;
}) {
  const qc = useQueryClient();
  const [key, setKey] = useState(initial?.key ?? '');
  const [value, setValue] = useState('');
  const [secret, setSecret] = useState(initial?.masked ?? true);
  const [description, setDescription] = useState(initial?.description ?? '');
  const save = useMutation({
    mutationFn: () => api('PUT', `/api/v1/variables/${enc(key)}`, { value, secret, description }),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['variables'] });
      onDone();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate();
  };
  return (
    <form
      className="form"
      onSubmit={submit}
      aria-label={initial ? `Edit ${initial.key}` : 'New Variable'}
    >
      <label>
        Key
        <input
          value={key}
          onChange={(e) => setKey(e.target.value)}
          readOnly={!!initial}
          required
          pattern="[A-Za-z0-9_][A-Za-z0-9_.\-]{0,249}"
        />
      </label>
      <label>
        Value{initial ? ' (replaces the current value)' : ''}
        <input
          type={secret ? 'password' : 'text'}
          autoComplete="off"
          value={value}
          onChange={(e) => setValue(e.target.value)}
          required
        />
      </label>
      <label className="check">
        <input type="checkbox" checked={secret} onChange={(e) => setSecret(e.target.checked)} />{' '}
        Secret (masked in lists and logs)
      </label>
      <label>
        Description
        <input value={description} onChange={(e) => setDescription(e.target.value)} />
      </label>
      <div className="actions">
        <button type="submit" disabled={save.isPending}>
          Save Variable
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      {save.isError && <ErrorNote error={save.error} />}
    </form>
  );
}

/**
 * Parses `airflow variables export` content ({"key": value, …}); non-string values are stored as
 * their JSON text, as Airflow does.
 */
export function parseVariablesExport(text: string): { key: string; value: string }[] | string {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return `not JSON: ${e instanceof Error ? e.message : String(e)}`;
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    return 'expected one JSON object of key → value, as `airflow variables export` writes';
  }
  return Object.entries(doc as Record<string, unknown>).map(([key, v]) => ({
    key,
    value: typeof v === 'string' ? v : JSON.stringify(v),
  }));
}

/** What an import did, one row per Variable or Connection, as each request came back. */
function ImportOutcomes({ outcomes, noun }: { outcomes: ImportOutcome[]; noun: string }) {
  const failed = outcomes.filter((o) => !o.ok).length;
  return (
    <>
      <p role="status">
        Imported {outcomes.length - failed} of {outcomes.length} {noun}
        {failed > 0 ? `; ${failed} refused (see below)` : ''}.
      </p>
      <table className="list" aria-label={`${noun} import results`}>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Result</th>
          </tr>
        </thead>
        <tbody>
          {outcomes.map((o) => (
            <tr key={o.name}>
              <th scope="row">{o.name}</th>
              <td className={o.ok ? undefined : 'error'}>{o.ok ? 'imported' : o.message}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

/**
 * Paste an `airflow variables export` file; each name's sensitivity follows its key. One
 * request per Variable (each audited by the server), so every one gets its own result.
 */
function ImportVariables({ onDone }: { onDone: () => void }) {
  const qc = useQueryClient();
  const [text, setText] = useState('');
  const [outcomes, setOutcomes] = useState<ImportOutcome[]>([]);
  const parsed = text.trim() === '' ? [] : parseVariablesExport(text);
  const run = useMutation({
    mutationFn: (variables: { key: string; value: string }[]) =>
      importEach(
        variables,
        (v) => v.key,
        (v) =>
          api('PUT', `/api/v1/variables/${enc(v.key)}`, {
            value: v.value,
            description: '',
          }),
        setOutcomes,
      ),
    onSettled: () => void qc.invalidateQueries({ queryKey: ['variables'] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setOutcomes([]);
    if (typeof parsed !== 'string') run.mutate(parsed);
  };
  return (
    <form className="form" onSubmit={submit} aria-label="Import Variables">
      <label>
        Variables (JSON, as `airflow variables export` writes)
        <textarea
          rows={6}
          value={text}
          onChange={(e) => setText(e.target.value)}
          aria-describedby="import-help"
        />
      </label>
      <p id="import-help" className={typeof parsed === 'string' ? 'error' : 'sub'}>
        {typeof parsed === 'string' ? parsed : `${parsed.length} Variables to import`}
      </p>
      <div className="actions">
        <button
          type="submit"
          disabled={typeof parsed === 'string' || parsed.length === 0 || run.isPending}
        >
          Import
        </button>
        <button type="button" onClick={onDone}>
          Close
        </button>
      </div>
      {outcomes.length > 0 && <ImportOutcomes outcomes={outcomes} noun="Variables" />}
    </form>
  );
}

type ConnFormat = 'json' | 'yaml' | 'env';
interface ParsedConnection {
  id: string;
  conn: Record<string, unknown>;
  description?: string;
}

/**
 * Paste an `airflow connections export` file (json, yaml or env), read by the very parser the
 * CLI uses (loaded when this form opens); one request per Connection, each with its result.
 */
function ImportConnections({ onDone }: { onDone: () => void }) {
  const qc = useQueryClient();
  const [text, setText] = useState('');
  const [format, setFormat] = useState<ConnFormat>('json');
  const [outcomes, setOutcomes] = useState<ImportOutcome[]>([]);
  const [problem, setProblem] = useState<string | null>(null);
  const run = useMutation({
    mutationFn: async () => {
      const { parseAirflowConnectionsExport } = await import('@leoflow/core/connections-import');
      let items: ParsedConnection[];
      try {
        items = parseAirflowConnectionsExport(text, format) as unknown as ParsedConnection[];
      } catch (e) {
        setProblem(e instanceof Error ? e.message : String(e));
        return [];
      }
      setProblem(null);
      return importEach(
        items,
        (c) => c.id,
        (c) =>
          api('PUT', `/api/v1/connections/${enc(c.id)}`, {
            connection: c.conn,
            description: c.description ?? '',
          }),
        setOutcomes,
      );
    },
    onSettled: () => void qc.invalidateQueries({ queryKey: ['connections'] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setOutcomes([]);
    run.mutate();
  };
  return (
    <form className="form" onSubmit={submit} aria-label="Import Connections">
      <label>
        Format
        <select value={format} onChange={(e) => setFormat(e.target.value as ConnFormat)}>
          <option value="json">json</option>
          <option value="yaml">yaml</option>
          <option value="env">env</option>
        </select>
      </label>
      <label>
        Connections (as `airflow connections export` writes)
        <textarea rows={6} value={text} onChange={(e) => setText(e.target.value)} />
      </label>
      {problem !== null && (
        <p className="error" role="alert">
          {problem}
        </p>
      )}
      <div className="actions">
        <button type="submit" disabled={text.trim() === '' || run.isPending}>
          Import
        </button>
        <button type="button" onClick={onDone}>
          Close
        </button>
      </div>
      {outcomes.length > 0 && <ImportOutcomes outcomes={outcomes} noun="Connections" />}
      {run.isError && <ErrorNote error={run.error} />}
    </form>
  );
}

/**
 * Export: with the reveal permission, the server's full export (values included; one audited
 * request); without it, a file built from the list, which never carries a secret value.
 */
function ExportVariables({ list }: { list: Reply<'get_variables'>['variables'] }) {
  const can = useCan();
  const [note, setNote] = useState<string | null>(null);
  const full = useMutation({
    mutationFn: () => api<Reply<'post_variables_export'>>('POST', '/api/v1/variables/export', {}),
    onSuccess: (r) => {
      downloadJson('variables.json', r.variables);
      setNote(`Exported ${Object.keys(r.variables).length} Variables, values included (audited).`);
    },
  });
  const partial = () => {
    const { doc, omitted } = variablesWithoutSecrets(list);
    downloadJson('variables.json', doc);
    setNote(
      `Exported ${Object.keys(doc).length} Variables without secret values` +
        (omitted.length > 0 ? `; left out (secret): ${omitted.join(', ')}.` : '.'),
    );
  };
  return (
    <>
      {can('variables:reveal') ? (
        <button type="button" onClick={() => full.mutate()} disabled={full.isPending}>
          Export with values (audited)
        </button>
      ) : (
        <button type="button" onClick={partial}>
          Export without secret values
        </button>
      )}
      {note !== null && <p role="status">{note}</p>}
      {full.isError && <ErrorNote error={full.error} />}
    </>
  );
}

function ExportConnections({ list }: { list: Reply<'get_connections'>['connections'] }) {
  const can = useCan();
  const [note, setNote] = useState<string | null>(null);
  const full = useMutation({
    mutationFn: () =>
      api<Reply<'post_connections_export'>>('POST', '/api/v1/connections/export', {}),
    onSuccess: (r) => {
      downloadJson('connections.json', connectionsAsAirflowJson(r.connections));
      setNote(
        `Exported ${Object.keys(r.connections).length} Connections, secrets included (audited).`,
      );
    },
  });
  const partial = () => {
    downloadJson('connections.json', connectionsWithoutSecrets(list));
    setNote(`Exported ${list.length} Connections without passwords or extra.`);
  };
  return (
    <>
      {can('connections:reveal') ? (
        <button type="button" onClick={() => full.mutate()} disabled={full.isPending}>
          Export with secrets (audited)
        </button>
      ) : (
        <button type="button" onClick={partial}>
          Export without secrets
        </button>
      )}
      {note !== null && <p role="status">{note}</p>}
      {full.isError && <ErrorNote error={full.error} />}
    </>
  );
}

interface ConnInitial {
  conn_id: string;
  conn_type: string;
  host: string | null;
  port: number | null;
  login: string | null;
  schema: string | null;
  description: string;
}

/** Set a Connection. The password is never pre-filled: saving replaces it (empty = none). */
function ConnectionForm({ initial, onDone }: { initial?: ConnInitial; onDone: () => void }) {
  const qc = useQueryClient();
  const [f, setF] = useState({
    conn_id: initial?.conn_id ?? '',
    conn_type: initial?.conn_type ?? '',
    host: initial?.host ?? '',
    port: initial?.port === null || initial?.port === undefined ? '' : String(initial.port),
    login: initial?.login ?? '',
    password: '',
    schema: initial?.schema ?? '',
    description: initial?.description ?? '',
  });
  const field = (k: keyof typeof f) => ({
    value: f[k],
    onChange: (e: { target: { value: string } }) => setF((x) => ({ ...x, [k]: e.target.value })),
  });
  const orNull = (v: string) => (v === '' ? null : v);
  const save = useMutation({
    mutationFn: () =>
      api('PUT', `/api/v1/connections/${enc(f.conn_id)}`, {
        connection: {
          conn_type: f.conn_type,
          host: orNull(f.host),
          port: f.port === '' ? null : Number(f.port),
          login: orNull(f.login),
          password: orNull(f.password),
          schema: orNull(f.schema),
        },
        description: f.description,
      }),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['connections'] });
      onDone();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate();
  };
  return (
    <form
      className="form"
      onSubmit={submit}
      aria-label={initial ? `Edit ${initial.conn_id}` : 'New Connection'}
    >
      <label>
        Id
        <input {...field('conn_id')} readOnly={!!initial} required />
      </label>
      <label>
        Type
        <input {...field('conn_type')} required placeholder="postgres, http, …" />
      </label>
      <label>
        Host
        <input {...field('host')} />
      </label>
      <label>
        Port
        <input {...field('port')} inputMode="numeric" pattern="[0-9]{0,5}" />
      </label>
      <label>
        Login
        <input {...field('login')} autoComplete="off" />
      </label>
      <label>
        Password{initial ? ' (replaces the current one; empty = none)' : ''}
        <input {...field('password')} type="password" autoComplete="off" />
      </label>
      <label>
        Schema
        <input {...field('schema')} />
      </label>
      <label>
        Description
        <input {...field('description')} />
      </label>
      <div className="actions">
        <button type="submit" disabled={save.isPending}>
          Save Connection
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      {save.isError && <ErrorNote error={save.error} />}
    </form>
  );
}

/**
 * Secret values are never fetched for display: the list carries masked values, and a reveal is
 * one explicit request per value (audited by the server), shown only to roles that hold the
 * reveal permission.
 */
type GrantKind = 'variables' | 'connections';
type GrantChange = Reply<'put_variables_by_key_grants'>;

function grantsText(g: readonly string[] | null | undefined): string {
  if (g === undefined) return '…';
  if (g === null) return 'every DAG';
  return g.length === 0 ? 'no DAG' : g.join(', ');
}

/**
 * Edit which DAGs may declare a secret (issue 34). Saving is possible only once the exact change
 * has been previewed (a dry run), which lists the registered DAGs that would lose the secret:
 * their tasks would then fail with LF_SECRET_NOT_GRANTED.
 */
export function GrantsForm({
  kind,
  name,
  current,
  onDone,
}: {
  kind: GrantKind;
  name: string;
  current: readonly string[] | null;
  onDone: () => void;
}) {
  const qc = useQueryClient();
  const [mode, setMode] = useState<'every' | 'patterns' | 'none'>(
    current === null ? 'every' : current.length === 0 ? 'none' : 'patterns',
  );
  const [text, setText] = useState(current?.join(' ') ?? '');
  const grants =
    mode === 'every' ? null : mode === 'none' ? [] : text.split(/[\s,]+/).filter((p) => p !== '');
  const key = JSON.stringify(grants);
  const [preview, setPreview] = useState<{ key: string; change: GrantChange } | null>(null);
  const url = `/api/v1/${kind}/${enc(name)}/grants`;
  const dry = useMutation({
    mutationFn: () => api<GrantChange>('PUT', url, { grants, dry_run: true }),
    onSuccess: (change) => setPreview({ key, change }),
  });
  const save = useMutation({
    mutationFn: () => api<GrantChange>('PUT', url, { grants }),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: [kind] });
      void qc.invalidateQueries({ queryKey: ['grants', kind, name] });
      onDone();
    },
  });
  const previewed = preview?.key === key ? preview.change : null;
  return (
    <form
      className="form"
      aria-label={`Grants of ${name}`}
      onSubmit={(e: FormEvent) => {
        e.preventDefault();
        if (previewed) save.mutate();
        else dry.mutate();
      }}
    >
      <p className="sub">
        Which DAGs may declare <code>{name}</code>: DAG id patterns, anchored and case-sensitive,
        with <code>*</code> and <code>?</code>.
      </p>
      <label className="check">
        <input type="radio" checked={mode === 'every'} onChange={() => setMode('every')} /> Every
        DAG of the tenant
      </label>
      <label className="check">
        <input type="radio" checked={mode === 'patterns'} onChange={() => setMode('patterns')} />{' '}
        Only DAGs matching
      </label>
      <label>
        Patterns (space- or comma-separated)
        <input
          value={text}
          onChange={(e) => {
            setText(e.target.value);
            setMode('patterns');
          }}
          placeholder="etl_* reporting"
        />
      </label>
      <label className="check">
        <input type="radio" checked={mode === 'none'} onChange={() => setMode('none')} /> No DAG
      </label>
      {previewed && (
        <div role="status" data-testid="grants-preview">
          {previewed.losing.length > 0 ? (
            <p className="error">
              Registered DAGs that would lose it (their tasks then fail with{' '}
              <code>LF_SECRET_NOT_GRANTED</code>): {previewed.losing.join(', ')}
            </p>
          ) : (
            <p>No registered DAG that declares it would lose it.</p>
          )}
          {previewed.gaining.length > 0 && (
            <p>Registered DAGs that would gain it: {previewed.gaining.join(', ')}</p>
          )}
        </div>
      )}
      <div className="actions">
        <button type="submit" disabled={dry.isPending || save.isPending}>
          {previewed ? 'Save grants' : 'Preview'}
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      {dry.isError && <ErrorNote error={dry.error} />}
      {save.isError && <ErrorNote error={save.error} />}
    </form>
  );
}

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
  const qc = useQueryClient();
  const [editing, setEditing] = useState<string | null>(null);
  const [granting, setGranting] = useState<string | null>(null);
  const [importing, setImporting] = useState(false);
  const remove = useMutation({
    mutationFn: (key: string) => api('DELETE', `/api/v1/variables/${enc(key)}`),
    onSettled: () => qc.invalidateQueries({ queryKey: ['variables'] }),
  });
  if (list.isError) return <ErrorNote error={list.error} />;
  const writable = can('variables:write');
  const current = list.data?.variables.find((v) => v.key === editing);
  return (
    <>
      <h1>Variables</h1>
      <div className="actions">
        {writable && editing === null && (
          <>
            <button type="button" onClick={() => setEditing('')}>
              New Variable
            </button>
            <button type="button" onClick={() => setImporting(true)}>
              Import…
            </button>
          </>
        )}
        {list.data && list.data.variables.length > 0 && (
          <ExportVariables list={list.data.variables} />
        )}
      </div>
      {importing && <ImportVariables onDone={() => setImporting(false)} />}
      {editing !== null && (
        <VariableForm
          key={editing}
          {...(current ? { initial: current } : {})}
          onDone={() => setEditing(null)}
        />
      )}
      {granting !== null && (
        <GrantsForm
          key={granting}
          kind="variables"
          name={granting}
          current={list.data?.variables.find((v) => v.key === granting)?.grants ?? null}
          onDone={() => setGranting(null)}
        />
      )}
      {list.data?.variables.length === 0 && (
        <p className="empty">
          No Variables yet.{' '}
          {writable
            ? 'Add one with “New Variable”, or `leoflow variables set <key> <value>`.'
            : 'Someone with variables:write adds them (`leoflow variables set`).'}
        </p>
      )}
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col">Value</th>
            <th scope="col">Description</th>
            <th scope="col">May be declared by</th>
            <th scope="col">Updated</th>
            {(writable || can('variables:grant')) && <th scope="col">Actions</th>}
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
              <td>{grantsText(v.grants)}</td>
              <td>
                <Time iso={v.updated_at} />
              </td>
              {(writable || can('variables:grant')) && (
                <td className="actions">
                  {writable && (
                    <button type="button" onClick={() => setEditing(v.key)}>
                      Edit
                    </button>
                  )}
                  {can('variables:grant') && (
                    <button type="button" onClick={() => setGranting(v.key)}>
                      Grants…
                    </button>
                  )}
                  {writable && <DeleteButton name={v.key} onDelete={() => remove.mutate(v.key)} />}
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {reveal.isError && <ErrorNote error={reveal.error} />}
      {remove.isError && <ErrorNote error={remove.error} />}
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
  const qc = useQueryClient();
  const [editing, setEditing] = useState<string | null>(null);
  const [granting, setGranting] = useState<string | null>(null);
  const [importing, setImporting] = useState(false);
  const remove = useMutation({
    mutationFn: (id: string) => api('DELETE', `/api/v1/connections/${enc(id)}`),
    onSettled: () => qc.invalidateQueries({ queryKey: ['connections'] }),
  });
  if (list.isError) return <ErrorNote error={list.error} />;
  const writable = can('connections:write');
  const current = list.data?.connections.find((c) => c.conn_id === editing);
  return (
    <>
      <h1>Connections</h1>
      <div className="actions">
        {writable && editing === null && (
          <>
            <button type="button" onClick={() => setEditing('')}>
              New Connection
            </button>
            <button type="button" onClick={() => setImporting(true)}>
              Import…
            </button>
          </>
        )}
        {list.data && list.data.connections.length > 0 && (
          <ExportConnections list={list.data.connections} />
        )}
      </div>
      {importing && <ImportConnections onDone={() => setImporting(false)} />}
      {editing !== null && (
        <ConnectionForm
          key={editing}
          {...(current
            ? {
                initial: {
                  conn_id: current.conn_id,
                  conn_type: current.conn_type,
                  host: current.host,
                  port: current.port,
                  login: current.login,
                  schema: current.schema,
                  description: current.description,
                },
              }
            : {})}
          onDone={() => setEditing(null)}
        />
      )}
      {granting !== null && (
        <GrantsForm
          key={granting}
          kind="connections"
          name={granting}
          current={list.data?.connections.find((c) => c.conn_id === granting)?.grants ?? null}
          onDone={() => setGranting(null)}
        />
      )}
      {list.data?.connections.length === 0 && (
        <p className="empty">
          No Connections yet.{' '}
          {writable
            ? 'Add one with “New Connection”, or `leoflow connections set <conn_id> --uri …`.'
            : 'Someone with connections:write adds them (`leoflow connections set`).'}
        </p>
      )}
      <table className="list">
        <thead>
          <tr>
            <th scope="col">Id</th>
            <th scope="col">Type</th>
            <th scope="col">Host</th>
            <th scope="col">Login</th>
            <th scope="col">Password</th>
            <th scope="col">May be declared by</th>
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
              <td>{grantsText(c.grants)}</td>
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
                {can('connections:grant') && (
                  <button type="button" onClick={() => setGranting(c.conn_id)}>
                    Grants…
                  </button>
                )}
                {writable && (
                  <>
                    <button type="button" onClick={() => setEditing(c.conn_id)}>
                      Edit
                    </button>
                    <DeleteButton name={c.conn_id} onDelete={() => remove.mutate(c.conn_id)} />
                  </>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {test.data && <pre role="status">{JSON.stringify(test.data, null, 2)}</pre>}
      {test.isError && <ErrorNote error={test.error} />}
      {reveal.isError && <ErrorNote error={reveal.error} />}
      {remove.isError && <ErrorNote error={remove.error} />}
    </>
  );
}
