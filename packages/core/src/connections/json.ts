import type { AirflowConnection, Connection } from './connection.js';
import { jsonError } from './errors.js';
import {
  NonFiniteNumberError,
  parsePyJson,
  PyJsonSyntaxError,
  pyJsonToJs,
  type PyJson,
} from './py-json.js';
import { pyStrip } from './py-str.js';
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
  conn: AirflowConnection;
  description: string | null;
}

export interface ParseConnectionJsonOptions {
  /** Told (fixed text, never a value) about what Airflow accepts but is probably a mistake. */
  warn?: (message: string) => void;
}

export const CONN_TYPE_MISSING_WARNING =
  'the connection JSON has no conn_type; Airflow accepts that (the type is unset), but hooks ' +
  'and Leoflow\'s vault need one (e.g. "conn_type": "postgres")';

/**
 * Parses Airflow's JSON connection form — what `airflow connections add --conn-json` takes and
 * what an `AIRFLOW_CONN_*` variable may hold since 2.3: `{conn_type, host, login, password,
 * schema, port, extra}` with `extra` an object or a JSON string of one. Throws
 * `LF_CONN_JSON_INVALID`; the message never contains any part of `text`.
 *
 * As `Connection.from_json`: a missing `conn_type` leaves the type unset (`null`, with a warning
 * through `opts.warn`), missing fields are `null`, `""` stays `""` (but a password `""` is `null`,
 * and an empty `extra` object or string is no extra).
 */
export function parseConnectionJson(
  text: string,
  opts: ParseConnectionJsonOptions = {},
): AirflowConnection {
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
  const { conn } = connectionFromFields(toJs(node) as Record<string, unknown>, (p) => jsonError(p));
  if (conn.conn_type === null) opts.warn?.(CONN_TYPE_MISSING_WARNING);
  return conn;
}

export const CONN_TYPE_REQUIRED =
  'conn_type is missing; Airflow reads such a connection from an environment variable, but ' +
  'its database — like Leoflow\'s vault — needs a type (e.g. "postgres")';

/**
 * For what goes to the vault, which — like Airflow's metadata database (`conn_type` is NOT NULL
 * there, so `airflow connections add/import` fail the same way) — needs a type. Throws
 * `LF_CONN_JSON_INVALID`, or what `fail` builds.
 */
export function requireConnType(
  conn: AirflowConnection,
  fail: (problem: string) => Error = jsonError,
): Connection {
  if (conn.conn_type === null) throw fail(CONN_TYPE_REQUIRED);
  return { ...conn, conn_type: conn.conn_type };
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
  /**
   * `from_json` (the JSON form) reads a port with `if port:`, so the number 0 is no port;
   * `Connection(**fields)` (an import file's entry) keeps 0.
   */
  portZero: 'none' | 'zero' = 'none',
): ConnectionFields {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) {
      throw fail(`it has a field that is not one of ${allowed.join(', ')}`);
    }
  }
  const connType = obj['conn_type'];
  // from_json: `if conn_type:` — absent, null or "" leaves the type unset.
  if (connType !== undefined && connType !== null && typeof connType !== 'string') {
    throw fail('conn_type must be a string');
  }
  const password = optionalString(obj['password'], 'password', fail);
  return {
    conn: {
      conn_type:
        connType === undefined || connType === null || connType === ''
          ? null
          : normalizeConnType(connType),
      host: optionalString(obj['host'], 'host', fail),
      login: optionalString(obj['login'], 'login', fail),
      // Airflow's password setter ignores a falsy value.
      password: password === '' ? null : password,
      schema: optionalString(obj['schema'], 'schema', fail),
      port: obj['port'] === 0 && portZero === 'zero' ? 0 : coercePort(obj['port'], fail),
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
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw fail(`${field} must be a string or null (quote it in YAML)`);
  return v;
}

/**
 * `from_json`'s `if port: int(port)`: null, "" and 0 are no port (0 is falsy there, while the
 * string "0" is port 0), a digit string is read as an integer. Leoflow is stricter than
 * `int()` about what it reads as one (see docs/connections.md).
 */
function coercePort(v: unknown, fail: (problem: string) => Error): number | null {
  if (v === undefined || v === null || v === '' || v === 0) return null;
  let n: number;
  if (typeof v === 'number') {
    n = v;
  } else if (typeof v === 'string' && /^[0-9]+$/.test(pyStrip(v))) {
    n = Number(pyStrip(v));
  } else {
    throw fail('port must be an integer');
  }
  if (!Number.isInteger(n)) throw fail('port must be an integer');
  if (n < 0 || n > 65535) throw fail('port is out of range 0-65535');
  return n;
}

function coerceExtra(v: unknown, fail: (problem: string) => Error): Record<string, unknown> | null {
  if (v === undefined || v === null || v === '') return null;
  // from_json: `if extra:` — an empty object is no extra (the string "{}" is kept, as there).
  if (isPlainObject(v)) return Object.keys(v).length === 0 ? null : v;
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
