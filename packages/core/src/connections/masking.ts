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

/**
 * The extra fields whose values are shown to users without the reveal permission: a short list
 * of settings that are never secret. Every other extra value is masked (default-deny) — a
 * secret under a name no list foresaw (`pwd`, `jwt`, `credentials`, `session_key`, `role_arn`…)
 * is hidden all the same. Matched on the whole name, case-insensitively, with runs of non-word
 * characters read as `_` (so `Region-Name` is `region_name`, but `project_secret` is not
 * `project`). docs/connections.md lists them.
 */
export const NON_SECRET_EXTRA_FIELDS: readonly string[] = Object.freeze([
  'charset',
  'connect_timeout',
  'location',
  'num_retries',
  'project',
  'project_id',
  'region',
  'region_name',
  'scope',
  'sslmode',
  'timeout',
  'use_ssl',
  'verify',
]);

const SHOWN = new Set(NON_SECRET_EXTRA_FIELDS);

/** True when an extra field of this name may be shown without reveal (NON_SECRET_EXTRA_FIELDS). */
export function isNonSecretExtraField(name: string): boolean {
  if (typeof name !== 'string') return false;
  const normalized = name
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_]+/gu, '_');
  return SHOWN.has(normalized);
}

/**
 * A copy of a connection's extra for users without reveal, default-deny: a field keeps its value
 * only when its name is on NON_SECRET_EXTRA_FIELDS and the value is a string, number or boolean.
 * Every other value becomes `***` whatever its type — an object or list is masked whole, keys and
 * all, even under a listed name, so nothing nested ever shows. A null stays null ("not set"
 * reveals nothing). The field names of the top level stay visible; the input is not modified.
 */
export function redactConnectionExtra(extra: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(extra).map(([k, v]): [string, unknown] => [k, shownValue(k, v)]),
  );
}

function shownValue(key: string, v: unknown): unknown {
  if (v === null) return null;
  const scalar = typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
  return scalar && isNonSecretExtraField(key) ? v : MASK;
}

/** A connection safe to show: password `***` when set, extra redacted. */
export function redactConnection(conn: Connection): Connection {
  return {
    ...conn,
    password: conn.password === null ? null : MASK,
    extra: conn.extra === null ? null : redactConnectionExtra(conn.extra),
  };
}
