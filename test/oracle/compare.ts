import {
  formatConnectionUri,
  isLeoflowError,
  normalizeConnection,
  normalizeConnType,
  parseConnectionJson,
  parseConnectionUri,
  type AirflowConnection,
  type Connection,
} from '@leoflow/core';
import { parsePyJson, type PyJson } from '../../packages/core/src/connections/py-json.js';

/**
 * How Leoflow's connection codec is held against Apache Airflow's two Connection classes:
 * `airflow.models.connection.Connection` ("core": the CLI, `connections import`, the metadata
 * database) and `airflow.sdk.Connection` ("sdk": what a running task gets). Each check returns
 * the problems it found (a failure) and the deliberate divergences it saw (counted, each one
 * listed in docs/connections.md).
 */

export interface AfFields {
  conn_type: string | null;
  host: string | null;
  login: string | null;
  password: string | null;
  schema: string | null;
  port: number | null;
  /** the stored text, as Airflow keeps it */
  extra: string | null;
  description: string | null;
}
export type Failed = { error: string };
export type Side<T> = T | Failed;
export interface AfWritten {
  fields: AfFields;
  get_uri: Side<string>;
  as_json: Side<string>;
  /** how each class reads `get_uri` back */
  reread?: { core: Side<AfFields>; sdk: Side<AfFields> };
}
export interface UriAnswer {
  core: Side<AfWritten>;
  sdk: Side<AfWritten>;
  /** characters of the request that Python's Unicode database does not know */
  py_unassigned?: string[];
}

/**
 * Node's ICU knows a newer Unicode than CPython 3.11 (Unicode 14.0), so a character added since
 * may have a case mapping in JavaScript and none in Python: lower-casing a host or upper-casing
 * an id then differs. Listed in docs/connections.md; no table can fix it without pinning ICU.
 */
export function newerUnicodeCased(answer: { py_unassigned?: string[] }): boolean {
  return (answer.py_unassigned ?? []).some((c) => c.toLowerCase() !== c || c.toUpperCase() !== c);
}
export interface ConnAnswer extends UriAnswer {
  export?: { json: Side<string>; env_uri: Side<string>; env_json: Side<string> };
}

export function failed(x: unknown): x is Failed {
  return typeof x === 'object' && x !== null && 'error' in x;
}

export class Findings {
  problems: string[] = [];
  divergences = new Set<string>();
  problem(s: string): void {
    this.problems.push(s);
  }
  diverge(name: string): void {
    this.divergences.add(name);
  }
}

// ---- JSON values compared as Python sees them -------------------------------------------

/** A JS value as a PyJson tree (numbers keep the lexeme JS would write). */
export function jsToPy(v: unknown): PyJson {
  if (v === null) return { kind: 'null' };
  if (v === true) return { kind: 'true' };
  if (v === false) return { kind: 'false' };
  if (typeof v === 'string') return { kind: 'string', value: v };
  if (typeof v === 'number') return { kind: 'number', lexeme: String(v) };
  if (Array.isArray(v)) return { kind: 'array', items: v.map(jsToPy) };
  const entries = new Map<string, { value: PyJson; line: number }>();
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    entries.set(k, { value: jsToPy(x), line: 1 });
  }
  return { kind: 'object', entries };
}

/** Python's json.loads, strictly (no BOM), or null when it would raise. */
export function pyLoads(s: string): PyJson | null {
  if (s.startsWith('\ufeff')) return null;
  try {
    return parsePyJson(s);
  } catch {
    return null;
  }
}

const INT = /^-?[0-9]+$/;

/**
 * Equality as a Python program comparing the two values would see it, except where a JS number
 * cannot say what Python's can: an integral float (`1.0`) and an integer past 2^53 compare by
 * value, noted as the divergence `extra-js-numbers`. Key order is not compared (dicts compare
 * equal in any order) but a difference is noted (`extra-key-order`).
 */
export function pyEqual(a: PyJson, b: PyJson, f: Findings): boolean {
  if (a.kind !== b.kind) return false;
  switch (a.kind) {
    case 'number': {
      const x = a.lexeme;
      const y = (b as typeof a).lexeme;
      if (x === y) return true;
      if (INT.test(x) && INT.test(y)) {
        if (BigInt(x) === BigInt(y)) return true;
        if (Number(x) === Number(y)) {
          f.diverge('extra-js-numbers');
          return true;
        }
        return false;
      }
      if (Number.isNaN(Number(x)) && Number.isNaN(Number(y))) return x === y;
      if (Number(x) === Number(y)) {
        if (INT.test(x) !== INT.test(y)) f.diverge('extra-js-numbers');
        return true;
      }
      return false;
    }
    case 'string':
      return a.value === (b as typeof a).value;
    case 'array': {
      const items = (b as typeof a).items;
      return a.items.length === items.length && a.items.every((v, i) => pyEqual(v, items[i]!, f));
    }
    case 'object': {
      const e = (b as typeof a).entries;
      if (a.entries.size !== e.size) return false;
      for (const [k, v] of a.entries) {
        const w = e.get(k);
        if (w === undefined || !pyEqual(v.value, w.value, f)) return false;
      }
      if ([...a.entries.keys()].join('\u0000') !== [...e.keys()].join('\u0000')) {
        f.diverge('extra-key-order');
      }
      return true;
    }
    default:
      return true;
  }
}

// ---- fields -----------------------------------------------------------------------------

type OurFields = AirflowConnection;

/**
 * Leoflow's reading vs one Airflow class's. `core` allows the one thing core does and the SDK
 * does not: JSON-decoding plain query values (`queryDecoded`).
 */
export function compareFields(
  label: string,
  ours: OurFields,
  af: AfFields,
  f: Findings,
  opts: { queryDecoded?: boolean } = {},
): boolean {
  const bad: string[] = [];
  for (const k of ['conn_type', 'host', 'login', 'schema', 'port'] as const) {
    if (ours[k] !== af[k]) bad.push(`${k}: Leoflow ${show(ours[k])}, Airflow ${show(af[k])}`);
  }
  if (ours.password !== af.password) {
    if (ours.password === null && af.password === '') f.diverge('empty-password-is-none');
    else bad.push(`password: Leoflow ${show(ours.password)}, Airflow ${show(af.password)}`);
  }
  if (!extraEqual(ours.extra, af.extra, f, opts.queryDecoded === true)) {
    bad.push(`extra: Leoflow ${show(ours.extra)}, Airflow ${show(af.extra)}`);
  }
  if (bad.length > 0) f.problem(`${label}: ${bad.join('; ')}`);
  return bad.length === 0;
}

function extraEqual(
  ours: Record<string, unknown> | null,
  afText: string | null,
  f: Findings,
  queryDecoded: boolean,
): boolean {
  if (ours === null || afText === null) return ours === null && afText === null;
  const af = pyLoads(afText);
  if (af === null) return false;
  let mine = jsToPy(ours);
  if (queryDecoded && mine.kind === 'object') {
    // Core's _parse_from_uri: each non-empty plain value that json.loads accepts is replaced
    // by what it decodes to.
    const entries = new Map(mine.entries);
    let changed = false;
    for (const [k, e] of entries) {
      if (e.value.kind !== 'string' || e.value.value === '') continue;
      const decoded = pyLoads(e.value.value);
      if (decoded !== null) {
        entries.set(k, { value: decoded, line: 1 });
        changed = true;
      }
    }
    if (changed) f.diverge('query-values-stay-strings');
    mine = { kind: 'object', entries };
  }
  return pyEqual(mine, af, f);
}

function show(v: unknown): string {
  return v === undefined ? 'undefined' : JSON.stringify(v);
}

/** A Leoflow connection in Airflow's terms (extra as the text Airflow would hold). */
function asAf(c: Connection): Omit<AfFields, 'description'> {
  return { ...c, extra: c.extra === null ? null : JSON.stringify(c.extra) };
}

function attempt<T>(fn: () => T): T | Error {
  try {
    return fn();
  } catch (e) {
    if (isLeoflowError(e)) return e;
    throw e;
  }
}

function problemOf(e: Error): string {
  const d = (e as { details?: { problem?: unknown } }).details;
  return typeof d?.problem === 'string' ? d.problem : e.message;
}

// ---- reading a URI ----------------------------------------------------------------------

/**
 * What Leoflow refuses although Airflow's task SDK reads it: each is listed in
 * docs/connections.md ("Where Leoflow is stricter"), matched by the fixed problem text.
 */
export const URI_REFUSALS: ReadonlyArray<readonly [string, RegExp]> = [
  ['uri-raw-hash', /raw "#"/],
  ['uri-control-character', /control character/],
  ['uri-bad-escape', /malformed percent-escape|not UTF-8/],
  ['uri-stray-bracket', /"\[" or "\]"|closing "\]"|bracketed IPv6/],
  ['uri-no-type', /does not start with a connection type/],
  ['uri-no-slashes', /must be followed by/],
  ['uri-extra-not-json-object', /__extra__ parameter/],
  ['uri-double-protocol', /"\:\/\/" appears more than once/],
  ['uri-port', /port/],
  ['uri-nfkc', /NFKC/],
];

/**
 * URIs Airflow reads wrong, where Leoflow knowingly reads what was written (listed in
 * docs/connections.md). Both come from `_parse_from_uri` treating "://" as text: it counts every
 * "://" in the URI, the query's included, and removes "<type>://" case-sensitively although
 * urlsplit has lower-cased the type.
 */
function airflowMisreads(uri: string, answer: { py_unassigned?: string[] }): string | null {
  const q = uri.indexOf('?');
  if (q >= 0 && uri.slice(q).includes('://')) return 'uri-scheme-separator-in-query';
  const scheme = /^[^:]*/.exec(uri.replace(/^[\u0000-\u0020]+/, ''))![0];
  if (uri.split('://').length === 3) {
    if (scheme !== scheme.toLowerCase()) return 'uri-uppercase-type-with-protocol-host';
    // `uri.replace("<type>://", "")` removes every occurrence, a protocol's included.
    if (uri.split(`${scheme}://`).length > 2) return 'uri-type-repeated-in-protocol';
  }
  if (newerUnicodeCased(answer)) return 'unicode-newer-than-python';
  return null;
}

/** Whether parse_qsl finds a parameter named exactly `__extra__` in the URI's query. */
function hasExtraParam(uri: string): boolean {
  const q = uri.indexOf('?');
  if (q < 0) return false;
  return uri
    .slice(q + 1)
    .split('&')
    .some((p) => {
      try {
        return decodeURIComponent(p.split('=')[0]!.replace(/\+/g, ' ')) === EXTRA_KEY;
      } catch {
        return false;
      }
    });
}

export function checkUriRead(uri: string, answer: UriAnswer, f: Findings): Connection | null {
  const ours = attempt(() => parseConnectionUri(uri));
  const sdk = answer.sdk;
  const core = answer.core;
  if (ours instanceof Error) {
    if (failed(sdk)) return null;
    const problem = problemOf(ours);
    const refusal = URI_REFUSALS.find(([, re]) => re.test(problem));
    if (refusal === undefined) {
      f.problem(`Leoflow refuses (${problem}) a URI the task SDK reads`);
    } else {
      f.diverge(refusal[0]);
    }
    return null;
  }
  if (failed(sdk)) {
    const misread = airflowMisreads(uri, answer);
    if (misread !== null) f.diverge(misread);
    else f.problem(`Leoflow reads a URI the task SDK refuses (${sdk.error})`);
    return ours;
  }
  if (!compareFields('', ours, sdk.fields, new Findings())) {
    const misread = airflowMisreads(uri, answer);
    if (misread !== null) {
      f.diverge(misread);
      return ours;
    }
  }
  compareFields('read by the task SDK', ours, sdk.fields, f);
  if (failed(core)) {
    // Core validates what the SDK keeps: an __extra__ that is not a JSON object, NaN in it.
    f.problem(`Leoflow reads a URI core refuses (${core.error})`);
  } else {
    compareFields('read by core', ours, core.fields, f, { queryDecoded: !hasExtraParam(uri) });
  }
  return ours;
}

// ---- writing a URI ----------------------------------------------------------------------

/** Does `reread` hold exactly `expected` (both classes)? */
function readsBack(reread: AfWritten['reread'], expected: Connection): boolean {
  if (reread === undefined) return false;
  const scratch = new Findings();
  for (const side of [reread.core, reread.sdk]) {
    if (failed(side)) return false;
    if (!compareFields('', expected, side, scratch)) return false;
  }
  // A reading that differs only where JS numbers cannot tell is still the same connection.
  return scratch.problems.length === 0 && !scratch.divergences.has('empty-password-is-none');
}

/** Names the deliberate formatter divergence a case shows, for the report. */
function formatterDivergence(c: Connection, oursUri: string, afUri: string | null): string {
  if (c.login === '' && c.password === null) return 'format-empty-login-kept';
  if (c.password === '') return 'format-empty-password-omitted';
  if (c.port === 0) return 'format-port-zero-kept';
  if (c.extra !== null && EXTRA_KEY in c.extra) return 'format-extra-key-named-__extra__';
  if (
    oursUri.includes('?__extra__=') &&
    afUri !== null &&
    !afUri.includes('?__extra__=') &&
    Object.values(c.extra ?? {}).some(
      (v) => typeof v === 'string' && v !== '' && pyLoads(v) !== null,
    )
  ) {
    return 'format-json-looking-strings-as-__extra__';
  }
  if ((c.host ?? '').includes('://')) return 'format-protocol-host';
  return 'format-other';
}
const EXTRA_KEY = '__extra__';

/**
 * Leoflow's get_uri (formatConnectionUri) of `c` against Airflow's. The rule: where Airflow's
 * own get_uri reads back as `c` in both classes, Leoflow writes the same bytes; where it does
 * not, Leoflow may write something else, and what it writes must read back as `c` in both.
 * `oursRead` is the oracle's reading of Leoflow's URI (null when Leoflow refused `c`).
 */
export function checkUriWrite(
  c: Connection,
  answer: ConnAnswer,
  oursRead: UriAnswer | null,
  f: Findings,
): void {
  const ours = attempt(() => formatConnectionUri(c));
  const expected = ours instanceof Error ? null : normalizeConnection(c);
  const written = [answer.sdk, answer.core].filter((w): w is AfWritten => !failed(w));
  const good = written.filter(
    (w) => typeof w.get_uri === 'string' && readsBack(w.reread, normalizeConnectionLoose(c)),
  );
  if (ours instanceof Error) {
    if (c.conn_type === '') {
      // Airflow's get_uri writes "//…" for a connection without a type and reads it back; a
      // Leoflow connection always has one (the vault requires it, as Airflow's database does).
      f.diverge('format-refuses-empty-conn-type');
      return;
    }
    if (good.length > 0) {
      f.problem(`Leoflow refuses (${problemOf(ours)}) a connection Airflow writes and reads back`);
    } else {
      f.diverge('format-refuses-what-airflow-cannot-read-back');
    }
    return;
  }
  const afUris = written.map((w) => w.get_uri).filter((u): u is string => typeof u === 'string');
  if (!afUris.includes(ours)) {
    const fine = good.map((w) => w.get_uri as string);
    if (fine.length > 0) {
      f.problem(
        `Leoflow writes ${ours}; Airflow writes ${fine[0]}, which reads back in both classes`,
      );
    } else {
      f.diverge(formatterDivergence(c, ours, afUris[0] ?? null));
    }
  }
  // Whatever Leoflow writes, both classes must read it back as normalizeConnection(c).
  if (oursRead === null) {
    f.problem('no reading of Leoflow’s URI');
    return;
  }
  for (const [name, side] of [
    ['core', oursRead.core],
    ['sdk', oursRead.sdk],
  ] as const) {
    if (failed(side)) {
      f.problem(`Airflow ${name} refuses Leoflow's URI ${ours}: ${side.error}`);
    } else {
      compareFields(`Leoflow's URI ${ours} read by Airflow ${name}`, expected!, side.fields, f);
    }
  }
}

/**
 * What Airflow's get_uri output should read back as, for judging Airflow's own output: our
 * normal form, except that a password "" is None (no class reads "" the same).
 */
function normalizeConnectionLoose(c: Connection): Connection {
  try {
    return normalizeConnection(c);
  } catch {
    return c;
  }
}

// ---- the JSON form ----------------------------------------------------------------------

export const JSON_REFUSALS: ReadonlyArray<readonly [string, RegExp]> = [
  ['json-port-strict', /port/],
  ['json-strings-must-be-strings', /must be a string/],
  ['json-extra-must-be-object', /extra/],
  ['json-unknown-field', /not one of/],
  ['json-non-finite-number', /NaN or Infinity/],
  ['json-bom', /not valid JSON/],
];

export function checkJsonRead(
  text: string,
  answer: UriAnswer,
  f: Findings,
): AirflowConnection | null {
  const ours = attempt(() => parseConnectionJson(text));
  const core = answer.core;
  const sdk = answer.sdk;
  if (ours instanceof Error) {
    if (failed(core) && failed(sdk)) return null;
    const problem = problemOf(ours);
    const refusal = JSON_REFUSALS.find(([, re]) => re.test(problem));
    if (refusal === undefined) f.problem(`Leoflow refuses (${problem}) JSON Airflow reads`);
    else f.diverge(refusal[0]);
    return null;
  }
  if (failed(core)) {
    // Python's json.loads refuses a text that starts with a byte-order mark; Leoflow's reader
    // skips one, as editors on some systems write it.
    if (text.startsWith('\ufeff') && /BOM/.test(core.error)) f.diverge('json-bom-accepted');
    else f.problem(`Leoflow reads JSON Airflow's core refuses (${core.error})`);
    return ours;
  }
  compareFields('JSON read by core', ours, core.fields, f);
  if (!failed(sdk)) compareFields('JSON read by the task SDK', ours, sdk.fields, f);
  return ours;
}

export { asAf };

// ---- environment names, ids, the task's reading ------------------------------------------

export interface EnvAnswer {
  airflow_name: Side<string>;
  set?: Failed;
  found?: string | null;
  task?: Side<AfFields> | null;
  py_unassigned?: string[];
}

/**
 * Leoflow's env name for an id, against Airflow's environment backend: the name must be the
 * one Airflow composes, and a value set under it must be what Airflow's own lookup finds.
 */
export function checkEnvName(
  kind: 'conn' | 'var',
  id: string,
  ours: string | Error,
  answer: EnvAnswer | null,
  f: Findings,
): void {
  if (ours instanceof Error) {
    // Leoflow refuses "" and names with "=" or NUL: no environment can hold such a name.
    if (id === '' || /[=\u0000]/.test(id)) f.diverge('env-name-unrepresentable');
    else f.problem(`Leoflow refuses the ${kind} id ${JSON.stringify(id)} (${ours.message})`);
    return;
  }
  if (answer === null) return;
  if (answer.airflow_name !== ours) {
    if (newerUnicodeCased(answer)) f.diverge('unicode-newer-than-python');
    else f.problem(`env name: Leoflow ${ours}, Airflow ${JSON.stringify(answer.airflow_name)}`);
    return;
  }
  if (answer.set !== undefined) {
    f.problem(`Python cannot set ${JSON.stringify(ours)}: ${answer.set.error}`);
    return;
  }
  if (answer.found !== 'generic://oracle-value') {
    f.problem(`Airflow's backend does not find ${JSON.stringify(ours)} by ${JSON.stringify(id)}`);
  }
}

/** A conn id Leoflow imports vs `sanitize_conn_id(id) == id`. */
export function checkConnId(
  id: string,
  oursValid: boolean,
  sanitized: string | null,
  answer: { py_unassigned?: string[] },
  f: Findings,
): void {
  const airflowValid = sanitized === id;
  if (oursValid === airflowValid) return;
  if (!oursValid && sanitized !== null && id === `${sanitized}\n`) {
    // re.match(r"^[…]{1,}$") lets "$" match before a final newline, and Airflow then keeps the
    // id without it: "abc\n" silently becomes "abc".
    f.diverge('conn-id-trailing-newline');
  } else if (newerUnicodeCased(answer) || (answer.py_unassigned ?? []).length > 0) {
    f.diverge('unicode-newer-than-python');
  } else {
    f.problem(
      `conn id ${JSON.stringify(id)}: Leoflow ${oursValid ? 'accepts' : 'refuses'} it, Airflow ${airflowValid ? 'accepts' : 'refuses'} it`,
    );
  }
}

/**
 * What a task reads from `AIRFLOW_CONN_<ID>`: Leoflow's SDK getConnection against Airflow's
 * worker-side environment backend (strip, then JSON or the task SDK's from_uri).
 */
export function checkTaskRead(
  value: string,
  ours: AirflowConnection | Error,
  answer: EnvAnswer,
  f: Findings,
): void {
  const task = answer.task;
  if (task === undefined || task === null) {
    if (!(ours instanceof Error)) f.problem('Airflow finds no connection; Leoflow reads one');
    return;
  }
  if (ours instanceof Error) {
    if (failed(task)) return;
    const problem = problemOf(ours);
    const refusal = [...URI_REFUSALS, ...JSON_REFUSALS].find(([, re]) => re.test(problem));
    if (refusal === undefined)
      f.problem(`Leoflow's task refuses (${problem}) what Airflow's reads`);
    else f.diverge(refusal[0]);
    return;
  }
  if (failed(task)) {
    const misread = airflowMisreads(value, answer);
    if (misread !== null) f.diverge(misread);
    else if (/BOM/.test(task.error)) f.diverge('json-bom-accepted');
    else f.problem(`Leoflow's task reads what Airflow's refuses (${task.error})`);
    return;
  }
  if (!compareFields('', ours, task, new Findings())) {
    const misread = airflowMisreads(value, answer);
    if (misread !== null) {
      f.diverge(misread);
      return;
    }
  }
  compareFields('read by a task', ours, task, f);
}

// ---- variables --------------------------------------------------------------------------

export interface StoredVariable {
  key: string;
  value: string;
  description: string | null;
}

export function checkVariablesImport(
  ours: { key: string; value: string; description?: string }[] | Error,
  answer: { stored?: StoredVariable[]; failed?: boolean; error?: string },
  f: Findings,
): void {
  if (ours instanceof Error) {
    if (answer.error !== undefined || answer.failed === true) return;
    const problem = problemOf(ours);
    if (/key is empty/.test(problem)) f.diverge('variables-blank-key-refused');
    else if (/description must be/.test(problem)) f.diverge('variables-description-must-be-string');
    else f.problem(`Leoflow refuses (${problem}) a file Airflow imports`);
    return;
  }
  if (answer.error !== undefined) {
    f.problem(`Leoflow imports a file Airflow refuses (${answer.error})`);
    return;
  }
  const mine = [...ours]
    .map((v) => ({ key: v.key, value: v.value, description: v.description ?? null }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const theirs = (answer.stored ?? []).map((v) => ({
    ...v,
    // Airflow stores a description "" as "", Leoflow as none; both show nothing.
    description: v.description === '' ? null : v.description,
  }));
  theirs.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  if (JSON.stringify(mine) !== JSON.stringify(theirs)) {
    f.problem(`variables: Leoflow ${JSON.stringify(mine)}, Airflow ${JSON.stringify(theirs)}`);
  }
}

export { airflowMisreads, problemOf };

/**
 * A connections file read by Leoflow's import and by `airflow connections import`
 * (`load_connections_dict`, core's Connection): the same ids with the same fields — except
 * that core JSON-decodes plain query values in an env file's URIs.
 */
export function checkConnectionsImport(
  format: 'json' | 'env' | 'yaml',
  text: string,
  ours: { id: string; conn: Connection; description?: string }[] | Error,
  answer: { connections?: Record<string, AfFields>; error?: string },
  f: Findings,
): void {
  if (ours instanceof Error) {
    if (answer.error === undefined)
      f.problem(`Leoflow refuses (${problemOf(ours)}) a ${format} file Airflow imports`);
    return;
  }
  if (answer.error !== undefined) {
    f.problem(`Leoflow imports a ${format} file Airflow refuses (${answer.error})`);
    return;
  }
  const theirs = answer.connections ?? {};
  const ids = ours.map((c) => c.id).sort();
  if (JSON.stringify(ids) !== JSON.stringify(Object.keys(theirs).sort())) {
    f.problem(
      `ids: Leoflow ${JSON.stringify(ids)}, Airflow ${JSON.stringify(Object.keys(theirs))}`,
    );
    return;
  }
  for (const { id, conn, description } of ours) {
    let af = theirs[id]!;
    if (
      af.conn_type !== null &&
      af.conn_type !== conn.conn_type &&
      normalizeConnType(af.conn_type) === conn.conn_type
    ) {
      // `Connection(**entry)` keeps a file's conn_type as written; Leoflow stores the type a
      // task will see once the URI is delivered (postgresql → postgres, "-" → "_").
      f.diverge('import-conn-type-normalised');
      af = { ...af, conn_type: conn.conn_type };
    }
    const line = text.split('\n').find((l) => l.startsWith(`${id}=`)) ?? '';
    compareFields(`${format} import of ${id}`, conn, af, f, {
      queryDecoded: format === 'env' && !hasExtraParam(line.slice(id.length + 1)),
    });
    if ((description ?? null) !== (af.description === '' ? null : af.description)) {
      f.problem(
        `${format} import of ${id}: description Leoflow ${show(description)}, Airflow ${show(af.description)}`,
      );
    }
  }
}
