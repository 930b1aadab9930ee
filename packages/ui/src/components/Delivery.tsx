import type { Reply } from '../api';
import { Time } from './Time';

export type DeliveryRecord =
  Reply<'get_dags_by_dag_id_runs_by_run_id_tasks_by_task_id_delivery'>['attempts'][number];

function Names({ names }: { names: readonly string[] | null }) {
  if (names === null) return <span className="sub">not delivered</span>;
  if (names.length === 0) return <span className="sub">none</span>;
  return (
    <ul className="names">
      {names.map((n) => (
        <li key={n}>
          <code>{n}</code>
        </li>
      ))}
    </ul>
  );
}

/**
 * One try's delivery record: the modes in force, the Variable and Connection names the server
 * delivered (names only; values never reach the browser), refusals, renewals and whether the
 * attempt's credential is still alive.
 */
export function Delivery({ record, now = Date.now() }: { record: DeliveryRecord; now?: number }) {
  const exp = record.credential_expires_at;
  const alive = exp !== null && Date.parse(exp) > now;
  const undeclared = record.undeclared_reads;
  return (
    <dl className="delivery" aria-label={`delivery record of try ${record.try_number}`}>
      <dt>Scoping mode</dt>
      <dd>{record.scoping_mode ?? '—'}</dd>
      <dt>Liveness mode</dt>
      <dd>{record.liveness_mode ?? '—'}</dd>
      <dt>Registered</dt>
      <dd>
        <Time iso={record.registered_at} />
      </dd>
      <dt>Variables delivered</dt>
      <dd data-testid="delivered-variables">
        <Names names={record.variables_delivered} />
        {record.variables_refusal && <p className="error">Refused: {record.variables_refusal}</p>}
      </dd>
      <dt>Connections delivered</dt>
      <dd data-testid="delivered-connections">
        <Names names={record.connections_delivered} />
        {record.connections_refusal && (
          <p className="error">Refused: {record.connections_refusal}</p>
        )}
      </dd>
      <dt>Renewals</dt>
      <dd>
        {record.renewals}
        {record.last_renewed_at && (
          <>
            {' '}
            · last <Time iso={record.last_renewed_at} />
          </>
        )}
        {record.renewal_stopped && <> · stopped: {record.renewal_stopped}</>}
      </dd>
      <dt>Credential</dt>
      <dd data-testid="credential-state">
        {exp === null ? (
          'never issued'
        ) : (
          <>
            <span className={alive ? 'ok' : 'sub'}>{alive ? 'alive' : 'expired'}</span> · expires{' '}
            <Time iso={exp} />
          </>
        )}
      </dd>
      {undeclared && (undeclared.variables.length > 0 || undeclared.connections.length > 0) && (
        <>
          <dt>Read without declaring</dt>
          <dd>
            {[
              ...undeclared.variables.map((v) => `variable ${v}`),
              ...undeclared.connections.map((c) => `connection ${c}`),
            ].join(', ')}
          </dd>
        </>
      )}
    </dl>
  );
}
