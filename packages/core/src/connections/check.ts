import type { Connection } from './connection.js';
import { analyzeGcpExtra, GCP_CONN_TYPE, readExtra } from './gcp.js';
import { problemOf } from './import-issues.js';
import {
  formatConnectionUri,
  isPlainObject,
  normalizeConnType,
  parseConnectionUri,
} from './uri.js';

export interface ConnectionCheck {
  name: string;
  ok: boolean;
  message: string;
}

export interface ConnectionCheckResult {
  ok: boolean;
  checks: ConnectionCheck[];
}

/** A Connection, or one whose extra is still Airflow's stored JSON text. */
export type ConnectionCheckInput = Omit<Connection, 'extra'> & {
  extra: Record<string, unknown> | string | null;
};

const NEEDS_HOST: Readonly<Record<string, string>> = {
  postgres: 'postgres',
  mysql: 'mysql',
  http: 'http',
};
const DATABASES = new Set(['postgres', 'mysql']);

/**
 * The structural checks behind `leoflow connections test`: no network, no cloud SDK, nothing
 * read from disk. Messages name fields and rules; the only values they quote are non-secret
 * structure (conn_type, a GCP key_path or project, a service account's client_email) — never a
 * password, key or extra value.
 */
export function checkConnectionStructure(conn: ConnectionCheckInput): ConnectionCheckResult {
  const checks: ConnectionCheck[] = [];
  const type = typeof conn.conn_type === 'string' ? normalizeConnType(conn.conn_type) : '';

  let extra: Record<string, unknown> | null = null;
  let extraOk = true;
  if (conn.extra === null || conn.extra === undefined || conn.extra === '') {
    extra = null;
  } else if (isPlainObject(conn.extra)) {
    extra = conn.extra;
  } else {
    const parsed = readExtra(conn.extra);
    if (parsed.ok) {
      extra = parsed.value;
    } else {
      extraOk = false;
      checks.push({ name: 'extra', ok: false, message: parsed.check.message });
    }
  }

  if (type === '') {
    checks.push({
      name: 'conn_type',
      ok: false,
      message: 'conn_type is required (e.g. "postgres")',
    });
  }

  if (conn.port !== null && conn.port !== undefined) {
    const min = DATABASES.has(type) ? 1 : 0;
    const ok = Number.isInteger(conn.port) && conn.port >= min && conn.port <= 65535;
    checks.push({
      name: 'port',
      ok,
      message: ok ? String(conn.port) : `port must be an integer in ${min}-65535`,
    });
  }

  const hostFor = NEEDS_HOST[type];
  if (hostFor !== undefined) {
    const ok = typeof conn.host === 'string' && conn.host.trim() !== '';
    checks.push({
      name: 'host',
      ok,
      message: ok ? 'set' : `host is required for ${hostFor} connections`,
    });
  }

  if (type === 'generic') {
    checks.push({
      name: 'generic',
      ok: true,
      message: 'generic connections accept any fields; nothing more to check',
    });
  } else if (type === GCP_CONN_TYPE) {
    if (extraOk) {
      for (const c of analyzeGcpExtra(extra).checks) {
        checks.push({ name: c.name, ok: c.ok, message: c.message });
      }
    }
  } else if (type !== '' && hostFor === undefined) {
    checks.push({
      name: 'conn_type',
      ok: true,
      message: `no structural rules for ${type} connections; only the common checks ran`,
    });
  }

  if (type !== '' && extraOk) checks.push(deliveryCheck({ ...conn, extra }));

  return { ok: checks.every((c) => c.ok), checks };
}

/**
 * Tasks receive the connection as an `AIRFLOW_CONN_<ID>` URI, so it must be writable as one;
 * the check also names the fields the task will see normalised.
 */
function deliveryCheck(conn: Connection): ConnectionCheck {
  const name = 'uri';
  let back: Connection;
  try {
    back = parseConnectionUri(formatConnectionUri(conn));
  } catch (e) {
    return { name, ok: false, message: problemOf(e) };
  }
  // Airflow itself reads an absent host or schema as "": that is no change worth naming.
  const same = (k: keyof Connection): boolean =>
    k === 'extra'
      ? JSON.stringify(conn.extra) === JSON.stringify(back.extra)
      : k === 'host' || k === 'schema'
        ? (conn[k] ?? '') === back[k]
        : conn[k] === back[k];
  const changed = (Object.keys(back) as (keyof Connection)[]).filter((k) => !same(k));
  return {
    name,
    ok: true,
    message:
      changed.length === 0
        ? 'delivered to tasks as an AIRFLOW_CONN_ URI unchanged'
        : `delivered to tasks as an AIRFLOW_CONN_ URI; the task sees ${changed.join(', ')} normalised (see docs/connections.md)`,
  };
}
