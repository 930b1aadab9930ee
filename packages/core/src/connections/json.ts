import type { Connection } from './connection.js';
import { jsonError } from './errors.js';
import {
  NonFiniteNumberError,
  parsePyJson,
  PyJsonSyntaxError,
  pyJsonToJs,
  type PyJson,
} from './py-json.js';
import { isPlainObject, normalizeConnType } from './uri.js';

/** The fields of Airflow's JSON connection form (`Connection.from_json` / `as_json`). */
export const CONNECTION_JSON_FIELDS = [
  'conn_type',
  'host',
  'login',
  'password',
  'schema',
  'port',
  'extra',
  'description',
] as const;

/** A connection read from an import source, with Airflow's optional description. */
export interface ConnectionFields {
  conn: Connection;
  description: string | null;
}

/**
 * Parses Airflow's JSON connection form — what `airflow connections add --conn-json` takes and
 * what an `AIRFLOW_CONN_*` variable may hold since 2.3: `{conn_type, host, login, password,
 * schema, port, extra}` with `extra` an object or a JSON string of one. Throws
 * `LF_CONN_JSON_INVALID`; the message never contains any part of `text`.
 */
export function parseConnectionJson(text: string): Connection {
  if (typeof text !== 'string') throw jsonError('the input is not a string');
  let node: PyJson;
  try {
    node = parsePyJson(text);
  } catch (e) {
    if (e instanceof PyJsonSyntaxError) throw jsonError(`not valid JSON (${e.message})`);
    throw e;
  }
  if (node.kind !== 'object') throw jsonError('the JSON is not an object');
  if (hasFloatPort(node)) throw jsonError('port must be an integer');
  return connectionFromFields(toJs(node) as Record<string, unknown>, (p) => jsonError(p)).conn;
}

/** Python's json reads `5432.0` as a float, which Airflow refuses as a port. */
export function hasFloatPort(node: PyJson): boolean {
  if (node.kind !== 'object') return false;
  const port = node.entries.get('port')?.value;
  return port?.kind === 'number' && /[.eE]/.test(port.lexeme);
}

function toJs(node: PyJson): unknown {
  try {
    return pyJsonToJs(node);
  } catch (e) {
    if (e instanceof NonFiniteNumberError) {
      throw jsonError('it contains NaN or Infinity, which a connection cannot carry');
    }
    throw e;
  }
}

/**
 * Turns Airflow's connection fields into a Connection. `fail` builds the error so that file
 * importers can name the entry; every problem text is fixed and names only the field.
 * Keys outside `allowed` are refused without being named (a key may be a misplaced secret).
 */
export function connectionFromFields(
  obj: Record<string, unknown>,
  fail: (problem: string) => Error,
  allowed: readonly string[] = CONNECTION_JSON_FIELDS,
): ConnectionFields {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) {
      throw fail(`it has a field that is not one of ${allowed.join(', ')}`);
    }
  }
  const connType = obj['conn_type'];
  if (connType === undefined || connType === null || connType === '') {
    throw fail('conn_type is missing; every connection needs a type (e.g. "postgres")');
  }
  if (typeof connType !== 'string') throw fail('conn_type must be a string');
  return {
    conn: {
      conn_type: normalizeConnType(connType),
      host: optionalString(obj['host'], 'host', fail),
      login: optionalString(obj['login'], 'login', fail),
      password: optionalString(obj['password'], 'password', fail),
      schema: optionalString(obj['schema'], 'schema', fail),
      port: coercePort(obj['port'], fail),
      extra: coerceExtra(obj['extra'], fail),
    },
    description: optionalString(obj['description'], 'description', fail),
  };
}

function optionalString(
  v: unknown,
  field: string,
  fail: (problem: string) => Error,
): string | null {
  if (v === undefined || v === null || v === '') return null;
  if (typeof v !== 'string') throw fail(`${field} must be a string or null (quote it in YAML)`);
  return v;
}

/** Airflow's `_coerce_port`: null or "" is no port, a digit string is read as an integer. */
function coercePort(v: unknown, fail: (problem: string) => Error): number | null {
  if (v === undefined || v === null || v === '') return null;
  let n: number;
  if (typeof v === 'number') {
    n = v;
  } else if (typeof v === 'string' && /^\s*[0-9]+\s*$/.test(v)) {
    n = Number(v.trim());
  } else {
    throw fail('port must be an integer');
  }
  if (!Number.isInteger(n)) throw fail('port must be an integer');
  if (n < 0 || n > 65535) throw fail('port is out of range 0-65535');
  return n;
}

function coerceExtra(v: unknown, fail: (problem: string) => Error): Record<string, unknown> | null {
  if (v === undefined || v === null || v === '') return null;
  if (isPlainObject(v)) return v;
  if (typeof v !== 'string') throw fail('extra must be an object or a JSON string of one');
  let node: PyJson;
  try {
    node = parsePyJson(v);
  } catch (e) {
    if (e instanceof PyJsonSyntaxError) throw fail('extra is a string but not valid JSON');
    throw e;
  }
  if (node.kind !== 'object') throw fail('extra must be a JSON object');
  try {
    return pyJsonToJs(node) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof NonFiniteNumberError) {
      throw fail('extra contains NaN or Infinity, which a connection cannot carry');
    }
    throw e;
  }
}
