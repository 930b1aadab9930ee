import { isMap, isScalar, LineCounter, parseDocument } from 'yaml';
import type { AirflowConnection, Connection } from './connection.js';
import {
  connectionFromFields,
  CONNECTION_JSON_FIELDS,
  hasFloatPort,
  parseConnectionJson,
  requireConnType,
} from './json.js';
import {
  CONN_ID_RULE,
  EntryProblem,
  importError,
  isValidConnId,
  problemOf,
  type ImportIssue,
} from './import-issues.js';
import { NonFiniteNumberError, parsePyJson, PyJsonSyntaxError, pyJsonToJs } from './py-json.js';
import { isPlainObject, parseConnectionUri } from './uri.js';

export interface ImportedConnection {
  id: string;
  conn: Connection;
  /** Airflow's connection description, when the source has a non-empty one. */
  description?: string;
}

export type ConnectionsExportFormat = 'json' | 'yaml' | 'env';

/**
 * Reads the files `airflow connections export` writes — `--file-format json` (an object
 * `conn_id → {conn_type, description, login, password, host, port, schema, extra}`, extra a JSON
 * string), `yaml` (the same mapping) and `env` (`conn_id=<URI>` lines, or `conn_id=<JSON>` with
 * `--serialization-format json`) — plus what Airflow's local-filesystem secrets backend accepts
 * in the same files (a URI string as the value, `extra` as an object, `extra_dejson`, `uri`).
 *
 * Entries come back in file order. Every problem in the file is collected and thrown at once
 * as `LF_CONN_IMPORT_INVALID`, each naming the line and connection id, never a value.
 */
export function parseAirflowConnectionsExport(
  text: string,
  format: ConnectionsExportFormat,
): ImportedConnection[] {
  const issues: ImportIssue[] = [];
  let out: ImportedConnection[];
  switch (format) {
    case 'env':
      out = fromEnvFile(text, issues);
      break;
    case 'json':
      out = fromJsonFile(text, issues);
      break;
    case 'yaml':
      out = fromYamlFile(text, issues);
      break;
    default:
      throw importError('LF_CONN_IMPORT_INVALID', 'the import', [
        { id: null, line: null, problem: 'the format must be one of json, yaml, env' },
      ]);
  }
  if (issues.length > 0) {
    throw importError('LF_CONN_IMPORT_INVALID', `the ${format} connections file`, issues);
  }
  return out;
}

/** `airflow connections export --file-format env` lines, read as Airflow's `_parse_env_file`. */
function fromEnvFile(text: string, issues: ImportIssue[]): ImportedConnection[] {
  const out: ImportedConnection[] = [];
  const seen = new Map<string, number>();
  const lines = text.replace(/^\ufeff/, '').split(/\r\n|\n|\r/);
  lines.forEach((raw, i) => {
    const line = i + 1;
    if (raw.trim() === '' || /^\s*#/.test(raw)) return;
    const eq = raw.indexOf('=');
    if (eq < 0) {
      issues.push({
        id: null,
        line,
        problem: 'the line has no "="; expected <conn_id>=<URI or JSON>',
      });
      return;
    }
    const id = raw.slice(0, eq);
    const value = raw.slice(eq + 1);
    if (id === '') {
      issues.push({ id: null, line, problem: 'the connection id before "=" is empty' });
      return;
    }
    if (!isValidConnId(id)) {
      issues.push({ id: null, line, problem: CONN_ID_RULE });
      return;
    }
    const first = seen.get(id);
    if (first !== undefined) {
      issues.push({
        id,
        line,
        problem: `the connection id appears again (first on line ${first})`,
      });
      return;
    }
    seen.set(id, line);
    if (value.trim() === '') {
      issues.push({ id, line, problem: 'the value after "=" is empty' });
      return;
    }
    try {
      out.push({ id, conn: connectionFromString(value) });
    } catch (e) {
      issues.push({ id, line, problem: problemOf(e) });
    }
  });
  return out;
}

/** A string value is a URI, or JSON when it starts with `{` (Airflow's env-backend rule). */
export function connectionFromString(value: string): Connection {
  return value.trim().startsWith('{')
    ? storable(parseConnectionJson(value))
    : parseConnectionUri(value);
}

/** An import goes to the vault, which needs a type (see requireConnType). */
function storable(conn: AirflowConnection): Connection {
  return requireConnType(conn, (p) => new EntryProblem(p));
}

function fromJsonFile(text: string, issues: ImportIssue[]): ImportedConnection[] {
  if (text.trim() === '') {
    issues.push({ id: null, line: 1, problem: 'the file is empty' });
    return [];
  }
  let root;
  try {
    root = parsePyJson(text);
  } catch (e) {
    if (!(e instanceof PyJsonSyntaxError)) throw e;
    issues.push({
      id: null,
      line: e.line,
      problem: `not valid JSON: ${e.problem} (column ${e.column})`,
    });
    return [];
  }
  if (root.kind !== 'object') {
    issues.push({
      id: null,
      line: 1,
      problem: 'the file must hold one object of conn_id → connection',
    });
    return [];
  }
  const entries: RawEntry[] = [];
  for (const [id, { value, line }] of root.entries) {
    const badPort = hasFloatPort(value);
    let js: unknown;
    try {
      js = pyJsonToJs(value);
    } catch (e) {
      if (!(e instanceof NonFiniteNumberError)) throw e;
      js = NON_FINITE;
    }
    entries.push({ id, line, value: badPort ? FLOAT_PORT : js });
  }
  return fromEntries(entries, issues);
}

function fromYamlFile(text: string, issues: ImportIssue[]): ImportedConnection[] {
  if (text.trim() === '') {
    issues.push({ id: null, line: 1, problem: 'the file is empty' });
    return [];
  }
  const lineCounter = new LineCounter();
  // Airflow reads these files with PyYAML's safe_load, i.e. YAML 1.1 (yes/no are booleans).
  const doc = parseDocument(text, { version: '1.1', lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    for (const err of doc.errors) {
      // The yaml library's messages quote source text; only its code and position are used.
      const line = lineCounter.linePos(err.pos[0]).line;
      const problem =
        err.code === 'DUPLICATE_KEY'
          ? 'the connection id appears more than once'
          : `not valid YAML (${err.code})`;
      issues.push({ id: null, line, problem });
    }
    return [];
  }
  if (!isMap(doc.contents)) {
    issues.push({
      id: null,
      line: 1,
      problem: 'the file must hold one mapping of conn_id → connection',
    });
    return [];
  }
  const entries: RawEntry[] = [];
  for (const pair of doc.contents.items) {
    const line =
      isScalar(pair.key) && pair.key.range ? lineCounter.linePos(pair.key.range[0]).line : null;
    if (!isScalar(pair.key) || typeof pair.key.value !== 'string') {
      issues.push({ id: null, line, problem: 'a connection id is not a string; quote it' });
      continue;
    }
    const value: unknown =
      pair.value === null ? null : (pair.value as { toJS(d: typeof doc): unknown }).toJS(doc);
    entries.push({ id: pair.key.value, line, value });
  }
  return fromEntries(entries, issues);
}

interface RawEntry {
  id: string;
  line: number | null;
  value: unknown;
}

const NON_FINITE = Symbol('non-finite');
const FLOAT_PORT = Symbol('float-port');
const FILE_FIELDS = [...CONNECTION_JSON_FIELDS, 'conn_id', 'uri', 'extra_dejson'];

/** Airflow's `_create_connection` for each `conn_id → value` of a JSON or YAML file. */
function fromEntries(entries: RawEntry[], issues: ImportIssue[]): ImportedConnection[] {
  const out: ImportedConnection[] = [];
  for (const { id, line, value } of entries) {
    if (!isValidConnId(id)) {
      issues.push({ id: null, line, problem: CONN_ID_RULE });
      continue;
    }
    const fail = (problem: string) => issues.push({ id, line, problem });
    if (value === NON_FINITE) {
      fail('it contains NaN or Infinity, which a connection cannot carry');
      continue;
    }
    if (value === FLOAT_PORT) {
      fail('port must be an integer');
      continue;
    }
    let v = value;
    // The local-filesystem backend accepts a one-element list per id.
    if (Array.isArray(v)) {
      if (v.length !== 1) {
        fail('the connection has several values; keep exactly one');
        continue;
      }
      v = v[0];
    }
    try {
      if (typeof v === 'string') {
        if (v.trim() === '') {
          fail('the value is empty');
          continue;
        }
        out.push({ id, conn: connectionFromString(v) });
      } else if (isPlainObject(v)) {
        out.push(fromObject(id, v));
      } else {
        fail('the value must be a connection URI string or an object of connection fields');
      }
    } catch (e) {
      fail(problemOf(e));
    }
  }
  return out;
}

function fromObject(id: string, obj: Record<string, unknown>): ImportedConnection {
  const fields = { ...obj };
  if ('conn_id' in fields) {
    if (fields['conn_id'] !== id) {
      throw new EntryProblem('its conn_id field differs from the key it is stored under');
    }
    delete fields['conn_id'];
  }
  const problem = (p: string) => new EntryProblem(p);
  if ('uri' in fields) {
    const { uri, description, ...others } = fields;
    if (Object.keys(others).length > 0) {
      throw problem('give either uri or the individual connection fields, not both');
    }
    if (typeof uri !== 'string') throw problem('uri must be a string');
    const d = description === undefined || description === null ? '' : description;
    if (typeof d !== 'string') throw problem('description must be a string or null');
    return withDescription(id, parseConnectionUri(uri), d);
  }
  if ('extra_dejson' in fields) {
    if ('extra' in fields) throw problem('extra and extra_dejson are mutually exclusive');
    if (!isPlainObject(fields['extra_dejson']) && fields['extra_dejson'] !== null) {
      throw problem('extra_dejson must be an object');
    }
    fields['extra'] = fields['extra_dejson'];
    delete fields['extra_dejson'];
  }
  const { conn, description } = connectionFromFields(fields, problem, FILE_FIELDS, 'zero');
  return withDescription(id, storable(conn), description ?? '');
}

function withDescription(id: string, conn: Connection, description: string): ImportedConnection {
  return description === '' ? { id, conn } : { id, conn, description };
}
