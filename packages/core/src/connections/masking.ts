import type { Connection } from './connection.js';

export const MASK = '***';

/**
 * Airflow's `DEFAULT_SENSITIVE_FIELDS` (secrets_masker), in its current, widest form — the 2.x
 * list (access_token … service_account) plus the names added since (access_key, auth_header,
 * bearer, connection_string, dsn, proxy, proxies, proxy_password, service_key, webhook_url).
 * Masking more than an older Airflow did only ever hides more.
 */
export const DEFAULT_SENSITIVE_FIELDS: readonly string[] = Object.freeze([
  'access_key',
  'access_token',
  'api_key',
  'apikey',
  'auth_header',
  'authorization',
  'bearer',
  'connection_string',
  'dsn',
  'keyfile_dict',
  'passphrase',
  'passwd',
  'password',
  'private_key',
  'proxies',
  'proxy',
  'proxy_password',
  'secret',
  'service_account',
  'service_key',
  'token',
  'webhook_url',
]);

/**
 * Airflow's `should_hide_value_for_key`: the name, trimmed and lower-cased, with every run of
 * non-word characters turned into `_` (so `api-key` and `API Key` match `api_key`), contains one
 * of the sensitive names as a substring. `extraSensitiveNames` plays the role of Airflow's
 * `[core] sensitive_var_conn_names`.
 */
export function isSensitiveKey(name: string, extraSensitiveNames: readonly string[] = []): boolean {
  if (typeof name !== 'string') return false;
  const normalized = name
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_]+/gu, '_');
  for (const s of DEFAULT_SENSITIVE_FIELDS) if (normalized.includes(s)) return true;
  for (const raw of extraSensitiveNames) {
    // An empty entry (from "a,,b") would match everything; Airflow has that bug, we skip it.
    const s = raw.trim().toLowerCase();
    if (s !== '' && normalized.includes(s)) return true;
  }
  return false;
}

// Deeper than any real extra; a cyclic or absurdly deep value is masked whole (fail closed).
const MAX_DEPTH = 64;

/**
 * A deep copy of a connection's extra for API replies: the value of every sensitive-named key,
 * at any depth and inside lists, becomes `***` whatever its type (a numeric PIN is still a
 * secret); a null value stays null, since "not set" reveals nothing. The input is not modified.
 */
export function redactConnectionExtra(
  extra: Record<string, unknown>,
  extraSensitiveNames: readonly string[] = [],
): Record<string, unknown> {
  return redactObject(extra, extraSensitiveNames, 0);
}

function redactObject(
  obj: Record<string, unknown>,
  names: readonly string[],
  depth: number,
): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(obj).map(([k, v]): [string, unknown] => [
      k,
      isSensitiveKey(k, names) ? (v === null ? null : MASK) : redactValue(v, names, depth + 1),
    ]),
  );
}

function redactValue(v: unknown, names: readonly string[], depth: number): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (depth > MAX_DEPTH) return MASK;
  if (Array.isArray(v)) return v.map((x) => redactValue(x, names, depth + 1));
  return redactObject(v as Record<string, unknown>, names, depth);
}

/** A connection safe to show: password `***` when set, extra redacted. */
export function redactConnection(
  conn: Connection,
  extraSensitiveNames: readonly string[] = [],
): Connection {
  return {
    ...conn,
    password: conn.password === null ? null : MASK,
    extra: conn.extra === null ? null : redactConnectionExtra(conn.extra, extraSensitiveNames),
  };
}
