import type { Connection } from './connection.js';
import {
  compareCodePoints,
  jsToPyJson,
  pyJsonDumps,
  pyJsonDumpsJs,
  type PyJson,
} from './py-json.js';
import { formatConnectionUri } from './uri.js';

/**
 * The file `airflow connections export` writes, for Leoflow's connections (Airflow 3.3.2's
 * `_format_connections`, checked byte for byte by the Airflow oracle):
 *
 * - `json`: `json.dumps({conn_id: {conn_type, description, login, password, host, port, schema,
 *   extra}}, indent=2)` — ids in order, `extra` as the JSON text Airflow stores (`json.dumps` of
 *   the object), `ensure_ascii` escapes, no newline at the end;
 * - `yaml`: the same mapping as YAML, every string double-quoted (not PyYAML's layout byte for
 *   byte, but a file PyYAML's safe_load — which `airflow connections import` uses — reads as
 *   the same connections);
 * - `env`: one `conn_id=<URI>` line per connection, the URI as Leoflow delivers it
 *   (formatConnectionUri: get_uri's, except where Airflow would read get_uri back wrong).
 *
 * Ids come in Airflow's order (`ORDER BY conn_id`: by code point). A password `""` is written as
 * null, as Airflow's database holds it. Descriptions are null: Leoflow's export carries none.
 */
export function formatAirflowConnectionsExport(
  connections: ReadonlyMap<string, Connection> | Record<string, Connection>,
  format: 'json' | 'yaml' | 'env',
): string {
  const entries: [string, Connection][] = (
    connections instanceof Map
      ? [...(connections as ReadonlyMap<string, Connection>)]
      : Object.entries(connections as Record<string, Connection>)
  ).sort(([a], [b]) => compareCodePoints(a, b));
  if (format === 'env') {
    return entries.map(([id, c]) => `${id}=${formatConnectionUri(c)}\n`).join('');
  }
  const fields = (c: Connection): Record<string, unknown> => ({
    conn_type: c.conn_type,
    description: null,
    login: c.login,
    password: c.password === '' ? null : c.password,
    host: c.host,
    port: c.port,
    schema: c.schema,
    extra: c.extra === null ? null : pyJsonDumpsJs(c.extra),
  });
  if (format === 'yaml') {
    return entries
      .map(([id, c]) => {
        const lines = Object.entries(fields(c)).map(([k, v]) => `  ${k}: ${yamlScalar(v)}\n`);
        return `${yamlString(id)}:\n${lines.join('')}`;
      })
      .join('');
  }
  const root = new Map<string, { value: PyJson; line: number }>();
  for (const [id, c] of entries) root.set(id, { value: jsToPyJson(fields(c)), line: 1 });
  return pyJsonDumps({ kind: 'object', entries: root }, 2);
}

/**
 * Airflow reads the file with PyYAML's safe_load (YAML 1.1), whose plain scalars turn `no`,
 * `on` or `0o17` into booleans and numbers and whose double-quoted scalars fold a raw line
 * break — NEL and U+2028/9 included — into a space. Every string is therefore written
 * double-quoted, with everything PyYAML would not take literally escaped: C0 and C1 controls,
 * DEL, the Unicode line separators, U+FEFF, and lone surrogates (\uXXXX gives them back).
 */
function yamlScalar(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'number') return String(v);
  return yamlString(v as string);
}

const YAML_ESCAPES: Readonly<Record<string, string>> = {
  '\\': '\\\\',
  '"': '\\"',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\u0000': '\\0',
};

function yamlString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    const c = s.charCodeAt(i);
    const simple = YAML_ESCAPES[ch];
    if (simple !== undefined) {
      out += simple;
    } else if (
      c >= 0xd800 &&
      c <= 0xdbff &&
      i + 1 < s.length &&
      (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00
    ) {
      out += ch + s[i + 1]!;
      i++;
    } else if (
      c < 0x20 ||
      (c >= 0x7f && c <= 0x9f) ||
      c === 0x2028 ||
      c === 0x2029 ||
      c === 0xfeff ||
      c === 0xfffe ||
      c === 0xffff ||
      (c >= 0xd800 && c <= 0xdfff)
    ) {
      out += '\\u' + c.toString(16).toUpperCase().padStart(4, '0');
    } else {
      out += ch;
    }
  }
  return out + '"';
}
