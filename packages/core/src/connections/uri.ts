import type { Connection } from './connection.js';
import { formatError, uriError } from './errors.js';
import { NotJsonError, parsePyJson, pyJsonDumpsJs } from './py-json.js';
import {
  decodeQueryPart,
  decodeStrict,
  isUnreserved,
  isWellFormed,
  quote,
  quotePlus,
} from './percent.js';

/** The query parameter Airflow (2.3+) uses to carry the whole extra as one JSON object. */
export const EXTRA_QUERY_KEY = '__extra__';

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*/;
const SCHEME_ONLY = /^[a-z][a-z0-9+.-]*$/;
// A protocol written in front of the host (`http://https://host`), which Airflow 2.x+ folds
// into the host as `https://host`.
const HOST_PROTOCOL = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;
const PROTOCOL_ONLY = /^[A-Za-z][A-Za-z0-9+.-]*$/;

/**
 * Airflow's `_normalize_conn_type`: `postgresql` → `postgres`, otherwise `-` → `_`. Applied to
 * the URI scheme (after lower-casing, as `urlsplit` does) and to `conn_type` in the JSON form
 * (which Airflow does not lower-case).
 */
export function normalizeConnType(connType: string): string {
  if (connType === 'postgresql') return 'postgres';
  return connType.replace(/-/g, '_');
}

/**
 * What `parseConnectionUri(formatConnectionUri(conn))` returns, for any connection the formatter
 * accepts: Airflow's `Connection(uri=c.get_uri())` in one place (see docs/connections.md).
 */
export function normalizeConnection(conn: Connection): Connection {
  const scheme = conn.conn_type.toLowerCase().replace(/_/g, '-');
  const { protocol, rest } = splitHostProtocol(conn.host, scheme);
  const hostBlockEmpty = rest === null || rest === '';
  // "@" follows a login or password that is not None, and "@:" comes before a port with neither
  // a host nor a userinfo in front of it; the parser reads a login (maybe "") only after an "@".
  const at =
    conn.login !== null ||
    emptyToNull(conn.password) !== null ||
    (hostBlockEmpty && conn.port !== null);
  let host = rest === null || rest === '' ? '' : hostAsAirflowReadsIt(rest);
  if (protocol !== null && host !== '') host = `${protocol.toLowerCase()}://${host}`;
  return {
    conn_type: normalizeConnType(scheme),
    host,
    login: at ? (conn.login ?? '') : null,
    // Airflow's password setter ignores a falsy value, so "" is read back as None.
    password: at ? emptyToNull(conn.password) : null,
    schema: conn.schema ?? '',
    port: conn.port,
    extra:
      conn.extra === null
        ? null
        : (JSON.parse(JSON.stringify(conn.extra)) as Record<string, unknown>),
  };
}

function emptyToNull(s: string | null): string | null {
  return s === null || s === '' ? null : s;
}

/**
 * Airflow's `get_uri` writes a host `protocol://rest` as `type://protocol://…rest`. Only a
 * protocol that is a URI scheme is written that way (Airflow would write any text there and
 * fail to read it back); any other host is percent-encoded whole, which Airflow reads back too
 * (a host holding "/" keeps its case and is decoded whole).
 */
function splitHostProtocol(
  host: string | null,
  scheme: string,
): { protocol: string | null; rest: string | null } {
  if (host === null) return { protocol: null, rest: null };
  const i = host.indexOf('://');
  const protocol = host.slice(0, i);
  // Airflow's parser removes every "<type>://" from the URI, so a protocol ending in the type
  // (`http://http://x`) would be read back wrong there: such a host is encoded whole.
  if (i > 0 && PROTOCOL_ONLY.test(protocol) && !protocol.endsWith(scheme)) {
    return { protocol: host.slice(0, i), rest: host.slice(i + 3) };
  }
  return { protocol: null, rest: host };
}

/**
 * The host `Connection(uri=…)` gives for a host written by `quote(host, safe='')`:
 * `urlsplit().hostname` lower-cases the text before its first `%` (the unreserved prefix of the
 * host), and a host holding `/` is taken undecoded-then-unquoted from the netloc, case kept.
 */
function hostAsAirflowReadsIt(host: string): string {
  if (host.includes('/')) return host;
  const m = /^[A-Za-z0-9_.~-]*/.exec(host)![0];
  return m.toLowerCase() + host.slice(m.length);
}

/**
 * Parses an Airflow connection URI with Airflow's semantics (`Connection._parse_from_uri`).
 * Throws `LF_CONN_URI_INVALID`; the message never contains any part of `uri`.
 */
export function parseConnectionUri(uri: string): Connection {
  if (typeof uri !== 'string') throw uriError('the URI is not a string');
  // urlsplit strips leading C0 controls and spaces, and drops tab, CR and LF wherever they are
  // (here: at the end, where an env file's \r is; inside they are refused below). Trailing
  // spaces stay, as there: callers that read Airflow's env or files strip first, as it does.
  const s = uri.replace(/^[\u0000-\u0020]+/, '').replace(/[\t\r\n]+$/, '');
  if (s === '') throw uriError('the URI is empty');
  if (!isWellFormed(s)) throw uriError('the URI is not well-formed Unicode');
  if (/[\u0000-\u001f\u007f]/.test(s)) {
    throw uriError('the URI contains a control character (tab, newline, …); percent-encode it');
  }
  const m = SCHEME.exec(s);
  if (m === null || s[m[0].length] !== ':') {
    throw uriError('it does not start with a connection type followed by "://"');
  }
  const connType = normalizeConnType(m[0].toLowerCase());
  let rest = s.slice(m[0].length + 1);
  // `<scheme>:` alone is a type-only connection (Airflow accepts it; so did Leoflow's Go codec).
  if (rest === '') return empty(connType);
  if (!rest.startsWith('//')) {
    throw uriError('the connection type must be followed by "://"');
  }
  rest = rest.slice(2);
  if (rest.includes('#')) {
    // urlsplit would silently drop everything after '#' — usually half a password.
    throw uriError('it contains a raw "#"; percent-encode it as %23');
  }

  const q = rest.indexOf('?');
  let before = q < 0 ? rest : rest.slice(0, q);
  const query = q < 0 ? null : rest.slice(q + 1);

  let protocol: string | null = null;
  const pm = HOST_PROTOCOL.exec(before);
  if (pm !== null) {
    protocol = pm[1]!.toLowerCase();
    before = before.slice(pm[0].length);
  }
  if (before.includes('://')) {
    throw uriError('"://" appears more than once before the query, or inside the login part');
  }

  const slash = before.indexOf('/');
  const authority = slash < 0 ? before : before.slice(0, slash);
  const path = slash < 0 ? '' : before.slice(slash);
  checkBrackets(authority);
  checkNfkc(authority);

  // The last '@' ends the userinfo and the first ':' inside it splits login from password,
  // as urlsplit does — so a raw '@' or ':' in a password still parses.
  const at = authority.lastIndexOf('@');
  let login: string | null = null;
  let password: string | null = null;
  if (at >= 0) {
    const userinfo = authority.slice(0, at);
    const colon = userinfo.indexOf(':');
    // urlsplit's username is "" for "@host" and ":pw@host"; Airflow keeps that "".
    login = decodePart(colon < 0 ? userinfo : userinfo.slice(0, colon), 'login');
    // Airflow's password setter ignores a falsy value: "user:@host" has password None.
    if (colon >= 0) password = decodePart(userinfo.slice(colon + 1), 'password') || null;
  }
  const hostport = authority.slice(at + 1);
  let rawHost: string;
  let rawPort: string;
  if (hostport.startsWith('[')) {
    const close = hostport.indexOf(']');
    if (close < 0) throw uriError('an IPv6 host "[" has no closing "]"');
    rawHost = hostport.slice(1, close);
    const after = hostport.slice(close + 1);
    if (after !== '' && !after.startsWith(':')) {
      throw uriError('only ":port" may follow a bracketed IPv6 host');
    }
    rawPort = after.slice(1);
  } else {
    if (/[[\]]/.test(hostport)) {
      throw uriError('the host contains "[" or "]" outside an IPv6 literal; percent-encode them');
    }
    const colon = hostport.indexOf(':');
    rawHost = colon < 0 ? hostport : hostport.slice(0, colon);
    rawPort = colon < 0 ? '' : hostport.slice(colon + 1);
  }
  let host = readHost(rawHost);
  // Airflow drops a protocol that has no host after it.
  if (protocol !== null && host !== '') host = `${protocol}://${host}`;

  return {
    conn_type: connType,
    host,
    login,
    password,
    // `uri_parts.path[1:]`: no path (or "/" alone) is schema "".
    schema: path === '' ? '' : decodePart(path.slice(1), 'schema'),
    port: parsePort(rawPort),
    extra: query === null ? null : parseQuery(query),
  };
}

/**
 * urlsplit's checks on the whole authority (userinfo included): "[" and "]" come as a pair, and
 * what the first pair holds must be an IPv6 address (an IPv4 one is refused) or an IPvFuture
 * literal — else Airflow raises "Invalid IPv6 URL" or the like, and so do we.
 */
function checkBrackets(authority: string): void {
  const open = authority.includes('[');
  if (open !== authority.includes(']')) {
    throw uriError('"[" or "]" appears without its pair before the path; percent-encode them');
  }
  if (!open) return;
  const inside = authority.slice(authority.indexOf('[') + 1);
  const bracketed = inside.slice(0, inside.indexOf(']') < 0 ? inside.length : inside.indexOf(']'));
  if (!(bracketed.startsWith('v') ? IP_FUTURE.test(bracketed) : isIPv6Literal(bracketed))) {
    throw uriError('the text in "[…]" is not an IPv6 address; percent-encode "[" and "]"');
  }
}

/**
 * urlsplit's `_checknetloc`: a non-ASCII authority whose NFKC form holds a "/", "?", "#", "@" or
 * ":" that the text itself did not (`℀` is "a/c") is refused, since another parser that
 * normalises would split it elsewhere (CVE-2019-9636).
 */
function checkNfkc(authority: string): void {
  if (/^[\u0000-\u007f]*$/.test(authority)) return;
  const n = authority.replace(/[@:#?]/g, '');
  const normalized = n.normalize('NFKC');
  if (n === normalized) return;
  if (/[/?#@:]/.test(normalized)) {
    throw uriError(
      'the part before the path has characters that NFKC normalisation turns into "/", "?", "#", "@" or ":"; percent-encode them',
    );
  }
}

const IP_FUTURE = /^v[a-fA-F0-9]+\..+$/s;
const IPV4 =
  /^(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/** Python's `ipaddress.ip_address(s)` accepting an IPv6 address (with an optional %zone). */
function isIPv6Literal(s: string): boolean {
  const pct = s.indexOf('%');
  const addr = pct < 0 ? s : s.slice(0, pct);
  if (pct >= 0 && (pct === s.length - 1 || s.indexOf('%', pct + 1) >= 0)) return false;
  const parts = addr.split(':');
  if (parts.length < 3) return false;
  let groups = parts.length;
  const last = parts[parts.length - 1]!;
  if (last.includes('.')) {
    if (!IPV4.test(last)) return false;
    parts[parts.length - 1] = '0';
    groups++;
  }
  if (groups > 9) return false;
  const double = addr.indexOf('::');
  if (double < 0) return groups === 8 && parts.every((p) => HEX_GROUP.test(p));
  if (addr.indexOf('::', double + 1) >= 0) return false;
  // "::" stands for at least one group; empty parts may only be those of the "::" itself.
  const [head, tail] = [addr.slice(0, double), addr.slice(double + 2)];
  const headParts = head === '' ? [] : head.split(':');
  const tailParts = tail === '' ? [] : tail.split(':');
  if (tail.includes('.')) tailParts[tailParts.length - 1] = '0';
  const explicit = headParts.length + tailParts.length + (tail.includes('.') ? 1 : 0);
  return explicit <= 7 && [...headParts, ...tailParts].every((p) => HEX_GROUP.test(p));
}

function empty(connType: string): Connection {
  return {
    conn_type: connType,
    host: '',
    login: null,
    password: null,
    schema: '',
    port: null,
    extra: null,
  };
}

function decodePart(raw: string, part: string): string {
  const v = decodeStrict(raw);
  if (v === null) {
    throw uriError(`the ${part} has a malformed percent-escape or is not UTF-8 once decoded`);
  }
  return v;
}

/**
 * Airflow's `_parse_netloc_to_hostname`: `urlsplit().hostname` lower-cases the raw host up to its
 * first "%" (the rest, like an IPv6 zone, keeps its case), then it is unquoted; a host that
 * decodes to something holding "/" (a socket path) is instead the raw text unquoted, case kept.
 */
function readHost(raw: string): string {
  if (raw === '') return '';
  const pct = raw.indexOf('%');
  const lowered = pct < 0 ? raw.toLowerCase() : raw.slice(0, pct).toLowerCase() + raw.slice(pct);
  const host = decodePart(lowered, 'host');
  return host.includes('/') ? decodePart(raw, 'host') : host;
}

function parsePort(raw: string): number | null {
  if (raw === '') return null;
  if (!/^[0-9]+$/.test(raw)) throw uriError('the port is not an integer');
  const n = Number(raw);
  if (n > 65535) throw uriError('the port is out of range 0-65535');
  return n;
}

function parseQuery(query: string): Record<string, unknown> | null {
  // Airflow: `if uri_parts.query:` — an empty query means no extra at all.
  if (query === '') return null;
  // dict(parse_qsl(..., keep_blank_values=True)): a repeated key keeps its last value.
  const params = new Map<string, string>();
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decodeQueryPart(eq < 0 ? pair : pair.slice(0, eq));
    const value = decodeQueryPart(eq < 0 ? '' : pair.slice(eq + 1));
    if (name === null || value === null) {
      throw uriError('a query parameter has a malformed percent-escape or is not UTF-8');
    }
    params.set(name, value);
  }
  const extraJson = params.get(EXTRA_QUERY_KEY);
  if (extraJson !== undefined) {
    // As in Airflow, __extra__ is the whole extra; other parameters beside it are ignored.
    let parsed: unknown;
    try {
      parsed = JSON.parse(extraJson);
    } catch {
      throw uriError(`the ${EXTRA_QUERY_KEY} parameter is not valid JSON`);
    }
    if (!isPlainObject(parsed)) {
      throw uriError(`the ${EXTRA_QUERY_KEY} parameter must be a JSON object`);
    }
    return parsed;
  }
  // fromEntries defines own properties, so a "__proto__" parameter stays an ordinary key.
  return Object.fromEntries(params);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Writes the connection as an Airflow URI (`Connection.get_uri`). Throws `LF_CONN_URI_INVALID`
 * when Airflow's format cannot carry it (a conn_type that is no URI scheme, a port outside
 * 0-65535, a string with a lone UTF-16 surrogate, an extra that is not a JSON object).
 */
export function formatConnectionUri(conn: Connection): string {
  if (typeof conn.conn_type !== 'string' || conn.conn_type === '') {
    throw formatError('conn_type is empty');
  }
  const scheme = conn.conn_type.toLowerCase().replace(/_/g, '-');
  if (!SCHEME_ONLY.test(scheme)) {
    throw formatError(
      'conn_type must start with a letter and contain only letters, digits, "_", "-", "+" and "."',
    );
  }
  let uri = `${scheme}://`;

  // A host `protocol://rest` is written `type://protocol://user:pass@rest…`, as get_uri does.
  const { protocol, rest } = splitHostProtocol(conn.host, scheme);
  if (protocol !== null) uri += `${protocol}://`;

  // get_uri tests `is not None`: a login "" is written as nothing, a password "" as ":". Unlike
  // get_uri, a login "" alone still gets its "@" (`type://@host`), which every Airflow reads back
  // as login "" — get_uri would drop it and the task would see None. A password "" is not
  // written at all: core reads `:""` as None and the task SDK as "", so only None reads the
  // same in both (and core's own get_uri never writes it: its setter ignores "").
  const password = emptyToNull(conn.password);
  const userinfo = conn.login !== null || password !== null;
  let authority = '';
  if (conn.login !== null) authority += encodePart(conn.login, 'login');
  if (password !== null) authority += ':' + encodePart(password, 'password');
  if (userinfo) uri += authority + '@';

  // The host is encoded whole, '/' and ':' included, so no host (`a/b`, `::1`) can be mistaken
  // for a path or a port by any Airflow version's parser.
  let hostBlock = rest === null || rest === '' ? '' : encodePart(rest, 'host');
  if (conn.port !== null) {
    if (!Number.isInteger(conn.port) || conn.port < 0 || conn.port > 65535) {
      throw formatError('port must be an integer in 0-65535');
    }
    // Without host and userinfo, "t://:5432" would read as an empty password, so Airflow
    // writes an empty userinfo first.
    hostBlock += (hostBlock === '' && !userinfo ? '@:' : ':') + String(conn.port);
  }
  const schema = emptyToNull(conn.schema);
  if (schema !== null) hostBlock += '/' + encodePart(schema, 'schema');
  uri += hostBlock;

  if (conn.extra !== null) {
    if (!isPlainObject(conn.extra)) throw formatError('extra must be a JSON object');
    uri += (schema !== null ? '?' : '/?') + formatExtra(conn.extra);
  }
  return uri;
}

/**
 * Whether core's `_parse_from_uri` would replace this plain query value by `json.loads(value)`:
 * it tries every non-empty value, and Python's json accepts what JSON does plus NaN, Infinity
 * and -Infinity, with surrounding whitespace, but no byte-order mark.
 */
function readAsJsonByCore(v: string): boolean {
  if (v === '' || v.startsWith('\ufeff')) return false;
  // Cheap test first: JSON text starts (after whitespace) with one of these.
  if (!/^[ \t\n\r]*[-0-9"[{tfnNI]/.test(v)) return false;
  try {
    parsePyJson(v);
    return true;
  } catch {
    return false;
  }
}

function encodePart(s: string, part: string): string {
  if (typeof s !== 'string') throw formatError(`${part} must be a string`);
  if (isUnreserved(s)) return s;
  if (!isWellFormed(s)) throw formatError(`${part} contains a lone UTF-16 surrogate`);
  return quote(s);
}

/**
 * Airflow writes plain `k=v` parameters when `parse_qsl(urlencode(extra))` gives the extra back
 * — i.e. a non-empty object of strings — and `__extra__=<JSON>` otherwise. Two cases force the
 * JSON form where Airflow's get_uri would not use it, because Airflow itself would read its own
 * output back wrong: a key named `__extra__` (read back as the JSON carrier), and a value that
 * Airflow's core Connection (the CLI, `connections import`, Airflow 2-style hooks) would
 * JSON-decode — `"30"` read back as the number 30, `"true"` as a boolean — while the task SDK
 * keeps it a string. In the JSON form both classes read the same strings.
 */
function formatExtra(extra: Record<string, unknown>): string {
  const entries = Object.entries(extra);
  const plain =
    entries.length > 0 &&
    entries.every(
      ([k, v]) =>
        k !== EXTRA_QUERY_KEY &&
        typeof v === 'string' &&
        (isUnreserved(k) || isWellFormed(k)) &&
        (isUnreserved(v) || isWellFormed(v)) &&
        !readAsJsonByCore(v),
    );
  if (plain) {
    return entries.map(([k, v]) => `${quotePlus(k)}=${quotePlus(v as string)}`).join('&');
  }
  // Airflow stores the extra as `json.dumps(extra)` text and form-encodes it: Python's separators
  // (", " and ": "), \uXXXX for everything outside printable ASCII, "+" for spaces.
  let json: string;
  try {
    json = pyJsonDumpsJs(extra);
  } catch (e) {
    if (e instanceof NotJsonError) throw formatError(`extra ${e.problem}`);
    throw e;
  }
  return `${EXTRA_QUERY_KEY}=${quotePlus(json)}`;
}
