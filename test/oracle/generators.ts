import fc from 'fast-check';
import type { Connection } from '@leoflow/core';

/**
 * Inputs for the Airflow differential tests: connections, URIs, JSON forms, ids and variables
 * built from every character a URI reserves, unicode, empty-versus-missing fields and the
 * shapes Airflow's own tests and bug reports are about (protocol hosts, IPv6, sockets, extras
 * that look like JSON).
 */

const RESERVED = [...'%@:/?#&=+ []!*\'()~.;,$"<>\\^`{|}'];
const HOSTILE = [
  ...RESERVED,
  '\t',
  '\n',
  'é',
  'ß',
  'İ',
  'ŉ',
  '密',
  '😀',
  '\u00a0',
  '\u0085',
  '\u001c',
  '\ufeff',
  '%2F',
  '%zz',
  '://',
  'a',
  'Z',
  '0',
  '-',
  '_',
];

/** Well-formed strings mixing reserved characters and arbitrary unicode. */
export const text = fc.oneof(
  fc.string({ unit: fc.constantFrom(...HOSTILE), minLength: 1, maxLength: 12 }),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 10 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }),
  fc.stringMatching(/^[a-z0-9._-]{1,12}$/),
);

/** `null` (missing), `""` (empty) or a string. */
const field = fc.oneof(
  { weight: 2, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.constant('') },
  { weight: 5, arbitrary: text },
);

const hostLike = fc.oneof(
  fc.constantFrom(
    'db.example.com',
    'DB.Example.COM',
    '10.0.0.1',
    '::1',
    'fe80::1%eth0',
    '2001:db8::1',
    '/tmp/.s.PGSQL.5432',
    '/var/run/Socket',
    'localhost',
    'a/b',
    'host:5432',
    'user@host',
  ),
  fc
    .tuple(
      fc.constantFrom(
        'https',
        'http',
        'HTTPS',
        'k8s',
        'spark',
        'postgres',
        'postgresql',
        'generic',
        'a b',
        's3a',
        'x+y.z-w',
        '',
      ),
      fc.oneof(
        fc.constantFrom('api.example.com', 'Api.Example.COM', '10.0.0.1', 'h/path', ''),
        text,
      ),
    )
    .map(([p, h]) => `${p}://${h}`),
  text,
);

/** conn_types: Airflow's names, ones the URI scheme normalises, and ones it cannot carry. */
export const connType = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'postgres',
      'mysql',
      'http',
      'generic',
      'google_cloud_platform',
      'aws',
      'spark',
      'k8s',
      'a.b+c',
    ),
  },
  { weight: 2, arbitrary: fc.stringMatching(/^[a-z][a-z0-9_+.]{0,10}$/) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'postgresql',
      'PostgreSQL',
      'my-conn-type',
      'Google-Cloud_Platform',
      'HTTP',
      '1abc',
      'a b',
      'é',
      '',
    ),
  },
);

/** Extra values that Airflow's core Connection would read as JSON from a plain query. */
const JSONISH = [
  '30',
  '-1',
  '1.0',
  '1e3',
  'true',
  'false',
  'null',
  '"q"',
  ' 7 ',
  '[1, 2]',
  '{}',
  '{"a": 1}',
  'NaN',
  'Infinity',
  '12345678901234567890',
  '\ufeff1',
  '1_000',
  '',
];

const extraKey = fc.oneof(
  { weight: 5, arbitrary: text },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '__extra__',
      '1',
      '10',
      '0',
      '-1',
      'timeout',
      '__proto__',
      'a b',
      'a+b',
    ),
  },
);
const extraString = fc.oneof(
  { weight: 4, arbitrary: text },
  { weight: 2, arbitrary: fc.constantFrom(...JSONISH) },
);

/** JSON values as a JS program holds them (no -0: JSON cannot tell it from 0). */
const jsonValue = fc
  .jsonValue({ maxDepth: 3 })
  .map((v) => JSON.parse(JSON.stringify(v)) as unknown);

export const extra: fc.Arbitrary<Record<string, unknown> | null> = fc.oneof(
  { weight: 2, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.constant({}) },
  {
    weight: 4,
    arbitrary: fc
      .array(fc.tuple(extraKey, extraString), { minLength: 1, maxLength: 4 })
      .map((kv) => Object.fromEntries(kv)),
  },
  {
    weight: 3,
    arbitrary: fc
      .array(
        fc.tuple(
          extraKey,
          fc.oneof(
            jsonValue,
            fc.dictionary(text, fc.dictionary(text, jsonValue, { maxKeys: 3 }), { maxKeys: 3 }),
            fc.constantFrom(1.5, 1e21, 0.1, -3, 42, 2 ** 53 + 2, 1e-7, true, null),
          ),
        ),
        { maxLength: 4 },
      )
      .map((kv) => Object.fromEntries(kv)),
  },
);

/** Connections as Leoflow's vault holds them (what delivery and export write). */
export const connection: fc.Arbitrary<Connection & { description: string | null }> = fc.record({
  conn_type: connType,
  host: fc.oneof({ weight: 1, arbitrary: field }, { weight: 2, arbitrary: hostLike }),
  login: field,
  password: field,
  schema: field,
  port: fc.oneof(
    fc.constant(null),
    fc.constantFrom(0, 1, 80, 5432, 65535),
    fc.integer({ min: 0, max: 65535 }),
  ),
  extra,
  description: fc.oneof(fc.constant(null), fc.constant(''), text),
});

function pct(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase(),
  );
}

/** A URI part, raw or percent-encoded (wholly, or only its risky characters). */
const uriPart = (raw: fc.Arbitrary<string>) =>
  fc.tuple(raw, fc.constantFrom('raw', 'quote', 'mixed')).map(([s, how]) => {
    if (how === 'raw') return s;
    try {
      if (how === 'quote') return pct(s);
      return s.replace(/[%@:/?#&=+ [\]]/g, (c) => pct(c));
    } catch {
      return s; // a lone surrogate: keep it raw
    }
  });

const queryValue = fc.oneof(
  fc.constantFrom(...JSONISH).map((v) => encodeURIComponent(v)),
  fc.constantFrom('1', '', 'a+b', 'a%2Bb', '%7B%22a%22%3A1%7D', 'x=y', 'http://x', '%zz', 'NaN'),
  uriPart(text),
);
const query = fc.oneof(
  fc.constant(''),
  fc.constant('?'),
  fc.constant('?&'),
  fc
    .array(
      fc.tuple(
        fc.oneof(fc.constantFrom('a', 'timeout', 'a+b', '1', 'b', 'a'), uriPart(text)),
        queryValue,
        fc.boolean(),
      ),
      {
        minLength: 1,
        maxLength: 4,
      },
    )
    .map((ps) => '?' + ps.map(([k, v, eq]) => (eq || v !== '' ? `${k}=${v}` : k)).join('&')),
  fc
    .tuple(extra, fc.constantFrom('json', 'py'))
    .filter(([e]) => e !== null)
    .map(([e, style]) => {
      const json =
        style === 'json' ? JSON.stringify(e) : JSON.stringify(e, null, 1).replace(/\n */g, ' ');
      return '?__extra__=' + pct(json);
    }),
  fc.constantFrom(
    '?__extra__=%7B%22a%22%3A+1.0%7D',
    '?__extra__=%7B%22b%22%3A1%2C%221%22%3A2%7D',
    '?__extra__=%7B%22n%22%3A+NaN%7D',
    '?__extra__=%5B1%5D',
    '?__extra__=notjson',
    '?__extra__=%7B%7D&a=1',
    '?a=1&__extra__=%7B%22z%22%3A%22y%22%7D',
    '?big=12345678901234567890123',
  ),
);

const scheme = fc.oneof(
  fc.constantFrom(
    'postgres',
    'postgresql',
    'my-conn-type',
    'http',
    'google-cloud-platform',
    'Generic',
    'a.b+c',
    'x',
    'POSTGRES',
    'mysql',
    'spark',
    'k8s',
    's3',
  ),
  fc.stringMatching(/^[a-z][a-z0-9+.-]{0,8}$/),
);
const protocol = fc.oneof(
  { weight: 6, arbitrary: fc.constant('') },
  {
    weight: 1,
    arbitrary: fc.constantFrom('https://', 'HTTPS://', 'k8s://', 'http://', 'spark://', 'a b://'),
  },
);
const userinfo = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.oneof(fc.constant(''), uriPart(text), fc.constantFrom('user', 'u%40x', 'USER')),
        fc.oneof(
          fc.constant(null),
          fc.constant(''),
          uriPart(text),
          fc.constantFrom('p@ss', 'p:ss', 'p%2Fs', 'p%23s', 'p+s', 'p%20s'),
        ),
      )
      .map(([l, p]) => (p === null ? `${l}@` : `${l}:${p}@`)),
  },
);
const host = fc.oneof(
  fc.constantFrom(
    '',
    'h',
    'db.example.com',
    'DB.Example.COM',
    '10.0.0.1',
    '[::1]',
    '[2001:db8::1]',
    '[fe80::1%25eth0]',
    '%2Ftmp%2F.s.PGSQL',
    '%2FTmP%2F',
    'AB%C3%89X',
    'xn--bcher-kva.example',
    'bücher.example',
    'a%3Ab',
    'h%2Fpath',
  ),
  uriPart(text),
);
const port = fc.oneof(
  { weight: 4, arbitrary: fc.constant('') },
  { weight: 4, arbitrary: fc.constantFrom(':5432', ':0', ':1', ':65535', ':') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      ':65536',
      ':-1',
      ':1.5',
      ':abc',
      ':٣',
      ':+1',
      ': 1',
      ':99999999999999999999',
    ),
  },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 65535 }).map((n) => `:${n}`) },
);
const path = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.constant('/') },
  { weight: 3, arbitrary: uriPart(text).map((s) => `/${s}`) },
  { weight: 1, arbitrary: fc.constantFrom('/db', '/a/b', '/db%2Fx', '/DB', '/%E5%AF%86', '/db;x') },
);
const fragment = fc.oneof(
  { weight: 8, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.constantFrom('#frag', '#', '#a=b') },
);

/** URIs as people and other tools write them, not only as a formatter writes them. */
export const uri: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(scheme, protocol, userinfo, host, port, path, query, fragment)
      .map(([s, pr, ui, h, po, pa, q, fr]) => `${s}://${pr}${ui}${h}${po}${pa}${q}${fr}`),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        scheme,
        fc.constantFrom(':', ':/', '://', ':///'),
        fc.string({ unit: fc.constantFrom(...HOSTILE), maxLength: 20 }),
      )
      .map(([s, sep, rest]) => `${s}${sep}${rest}`),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom('', ' ', '\t', '\r\n', '\u00a0'),
        scheme,
        host,
        path,
        fc.constantFrom('', ' ', '\r', '\n', '\u00a0'),
      )
      .map(([a, s, h, p, b]) => `${a}${s}://${h}${p}${b}`),
  },
);

/** Airflow's JSON connection form, as written by hand, by other tools and by Airflow. */
const jsonFields = fc.record(
  {
    conn_type: fc.oneof(connType, fc.constant(null), fc.constant(''), fc.constant(5)),
    host: fc.oneof({ weight: 9, arbitrary: field }, { weight: 1, arbitrary: fc.constant(7) }),
    login: field,
    password: fc.oneof(
      { weight: 9, arbitrary: field },
      { weight: 1, arbitrary: fc.constant(1234) },
    ),
    schema: field,
    port: fc.oneof(
      fc.constant(null),
      fc.constantFrom(
        0,
        5432,
        65535,
        65536,
        -1,
        1.5,
        '5432',
        ' 5432 ',
        '',
        '1.5',
        'abc',
        '+5',
        '5_432',
        '５４３２',
        true,
        '0',
        1e3,
      ),
      fc.integer({ min: 0, max: 65535 }),
    ),
    extra: fc.oneof(
      extra,
      extra.map((e) => (e === null ? '' : JSON.stringify(e))),
      fc.constantFrom(
        '',
        '{}',
        '[]',
        '[1]',
        'not json',
        '{"a": NaN}',
        '"x"',
        0,
        [],
        [1],
        false,
        true,
      ),
    ),
    description: fc.oneof(
      { weight: 9, arbitrary: field },
      { weight: 1, arbitrary: fc.constant(3) },
    ),
  },
  { requiredKeys: [] },
);
const oddKey = fc.constantFrom<Record<string, unknown>>(
  { uri: 'postgres://h/db' },
  { conn_id: 'x' },
  { extra_dejson: {} },
  { unknown: 1 },
);

export const connectionJson: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 12,
    arbitrary: jsonFields.chain((o) =>
      fc.constantFrom(
        JSON.stringify(o),
        JSON.stringify(o, null, 2),
        // Airflow's '{' rule looks at the first character after Python's strip().
        ` ${JSON.stringify(o)}\n`,
      ),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(jsonFields, oddKey).map(([o, k]) => JSON.stringify({ ...o, ...k })),
  },
  {
    weight: 1,
    // Lexemes a JS value cannot carry: floats with ".0", huge integers, repeated keys.
    arbitrary: fc.constantFrom(
      '{"conn_type": "pg", "port": 5432.0}',
      '{"conn_type": "pg", "port": 5432e0}',
      '{"conn_type": "pg", "port": 1e400}',
      '{"conn_type": "pg", "port": 99999999999999999999}',
      '{"conn_type": "pg", "extra": {"a": 1.0, "b": 12345678901234567890}}',
      '{"conn_type": "pg", "host": "a", "host": "b"}',
      '{"conn_type": "pg", "extra": {"b": 1, "1": 2}}',
      '\ufeff{"conn_type": "pg"}',
      '{"conn_type": "pg"} x',
      '[]',
      '{"conn_type": "pg", "login": "\\ud800"}',
    ),
  },
);

/** Connection ids and variable keys, valid and not. */
export const secretName = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9_]{1,20}$/),
  fc.stringMatching(/^[a-z][a-z0-9_.:/#!()\\-]{0,20}$/),
  fc.constantFrom(
    'my-db',
    'my.db',
    'ß',
    'ﬁle',
    'straße',
    'İstanbul',
    'ŉ',
    'ǅ',
    'ᾳ',
    'µ',
    'ı',
    'ς',
    'ﬃ',
    'a b',
    'a=b',
    'abc\n',
    'x'.repeat(251),
    'x'.repeat(250),
    '🙂',
    'é',
    'Ⅻ',
    '٣',
    '²',
  ),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 6 }),
);

/** What a task may find in AIRFLOW_CONN_<ID>: either form, with whitespace around it. */
export const envValue = fc
  .tuple(
    fc.constantFrom('', ' ', '\n', '\t', '\u00a0', '\u0085', '\u001c', '\ufeff', '\r\n'),
    fc.oneof(uri, connectionJson),
    fc.constantFrom('', ' ', '\n', '\r\n', '\u2028', '\u001f', '\ufeff'),
  )
  .map(([a, v, b]) => `${a}${v}${b}`);

/** A JSON value's text as Python writes or reads it: lexemes a JS value cannot hold, too. */
const variableValueText: fc.Arbitrary<string> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null'),
  text.map((s) => JSON.stringify(s)),
  fc.constantFrom(
    '1.0',
    '1e16',
    '1E+2',
    '-0.0',
    '1e-05',
    '0.1',
    '12345678901234567890123',
    'NaN',
    '-Infinity',
    '"\\ud83d\\ude00"',
    '"\\u00e9"',
    '"123"',
    '" 123"',
    '"{\\"a\\": 1}"',
    '{"b": 1, "1": 2, "a": [1.0, {}]}',
    '[]',
    '{}',
    '{"value": 5, "description": "d"}',
    '{"value": "s", "description": null}',
    '{"value": {"value": 1}}',
    '{"value": 1, "description": 3}',
    '{"description": "no value"}',
  ),
);

/** `airflow variables export`-shaped files (and what people write by hand). */
export const variablesFile: fc.Arbitrary<string> = fc
  .array(
    fc.tuple(
      fc.oneof(text, fc.constantFrom('a', 'key', 'KEY', 'a', ' ', '1', '__proto__')),
      variableValueText,
    ),
    { maxLength: 6 },
  )
  .chain((entries) =>
    fc.constantFrom(
      `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${v}`).join(', ')}}`,
      `{\n${entries.map(([k, v]) => `    ${JSON.stringify(k)}: ${v}`).join(',\n')}\n}`,
    ),
  );

/** Variables as Leoflow's vault holds them: a key and a string. */
export const variables: fc.Arbitrary<Record<string, string>> = fc
  .array(
    fc.tuple(
      text.filter((k) => k.trim() !== ''),
      fc.oneof(
        text,
        fc.constantFrom('', '123', ' 123', '{"a": 1.0}', 'null', '"q"', 'NaN', '[1, 2]'),
      ),
    ),
    { maxLength: 6 },
  )
  .map((kv) => Object.fromEntries(kv));
