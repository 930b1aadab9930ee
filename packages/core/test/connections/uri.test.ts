import { describe, expect, it } from 'vitest';
import {
  formatConnectionUri,
  isLeoflowError,
  normalizeConnection,
  parseConnectionUri,
  type Connection,
} from '@leoflow/core';

const base: Connection = {
  conn_type: 'generic',
  host: '',
  login: null,
  password: null,
  schema: '',
  port: null,
  extra: null,
};
const conn = (c: Partial<Connection>): Connection => ({ ...base, ...c });

/** Asserts `fn` throws a LeoflowError with `code` whose message shares nothing with `input`. */
function expectSafeError(fn: () => unknown, code: string, input: string): string {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(isLeoflowError(err), 'throws a LeoflowError').toBe(true);
  if (!isLeoflowError(err)) return '';
  expect(err.code).toBe(code);
  const trimmed = input.trim();
  if (trimmed.length >= 3) expect(err.message).not.toContain(trimmed);
  expect(JSON.stringify(err.details)).not.toContain(trimmed.length >= 3 ? trimmed : '\u0000');
  return err.message;
}

describe("Airflow's documented URI examples", () => {
  it('my-conn-type://login:password@host:5432/schema?param1=val1&param2=val2', () => {
    expect(
      parseConnectionUri('my-conn-type://login:password@host:5432/schema?param1=val1&param2=val2'),
    ).toEqual({
      conn_type: 'my_conn_type',
      host: 'host',
      login: 'login',
      password: 'password',
      schema: 'schema',
      port: 5432,
      extra: { param1: 'val1', param2: 'val2' },
    });
  });

  it('the local-filesystem example with an encoded "/" in the password', () => {
    const c = parseConnectionUri(
      'my-conn-type://my-login:my-pa%2Fssword@my-host:5432/my-schema?param1=val1&param2=val2',
    );
    expect(c.password).toBe('my-pa/ssword');
    expect(c.login).toBe('my-login');
    expect(c.host).toBe('my-host');
  });

  it('mysql://user:pass@db.example.com:3306/app', () => {
    expect(parseConnectionUri('mysql://user:pass@db.example.com:3306/app')).toEqual(
      conn({
        conn_type: 'mysql',
        host: 'db.example.com',
        login: 'user',
        password: 'pass',
        port: 3306,
        schema: 'app',
      }),
    );
  });

  it('postgresql:// is read as conn_type postgres', () => {
    expect(parseConnectionUri('postgresql://u:p@h:5432/db').conn_type).toBe('postgres');
    expect(parseConnectionUri('POSTGRESQL://h').conn_type).toBe('postgres');
  });

  it('google-cloud-platform://?__extra__=… carries a nested JSON extra', () => {
    const extra = {
      project: 'my-project',
      scopes: ['https://www.googleapis.com/auth/cloud-platform'],
      num_retries: 5,
    };
    const uri = `google-cloud-platform://?__extra__=${encodeURIComponent(JSON.stringify(extra))}`;
    expect(parseConnectionUri(uri)).toEqual(conn({ conn_type: 'google_cloud_platform', extra }));
  });

  it('the JSON-in-query example with "+" for spaces (urlencode output)', () => {
    const c = parseConnectionUri(
      'google-cloud-platform://?__extra__=%7B%22project%22%3A+%22p%22%2C+%22num_retries%22%3A+5%7D',
    );
    expect(c.extra).toEqual({ project: 'p', num_retries: 5 });
  });
});

describe('T99: google_cloud_platform → scheme google-cloud-platform', () => {
  it('writes the scheme with "-" and the extra as __extra__ JSON', () => {
    const uri = formatConnectionUri(
      conn({ conn_type: 'google_cloud_platform', extra: { project: 'p', num_retries: 5 } }),
    );
    expect(uri.startsWith('google-cloud-platform://')).toBe(true);
    const q = new URLSearchParams(uri.slice(uri.indexOf('?') + 1));
    expect(JSON.parse(q.get('__extra__')!)).toEqual({ project: 'p', num_retries: 5 });
    expect(parseConnectionUri(uri).conn_type).toBe('google_cloud_platform');
  });

  it('an all-string extra is written as plain parameters, as Airflow does', () => {
    const uri = formatConnectionUri(
      conn({ conn_type: 'google_cloud_platform', extra: { project: 'p' } }),
    );
    expect(uri).toBe('google-cloud-platform:///?project=p');
    expect(parseConnectionUri(uri).extra).toEqual({ project: 'p' });
  });
});

describe('T100: special characters in login and password', () => {
  const c = conn({
    conn_type: 'postgres',
    login: 'us@er',
    password: 'p@ss:w/rd',
    host: 'h',
    port: 5432,
    schema: 'db',
  });

  it('percent-encodes the userinfo', () => {
    expect(formatConnectionUri(c)).toBe('postgres://us%40er:p%40ss%3Aw%2Frd@h:5432/db');
  });

  it('parses back to the same fields', () => {
    expect(parseConnectionUri(formatConnectionUri(c))).toEqual(c);
  });

  it.each(['', '   ', 'host:5432', 'postgres://h:abc/db'])(
    'refuses %j with a message that does not contain it',
    (input) => {
      expectSafeError(() => parseConnectionUri(input), 'LF_CONN_URI_INVALID', input);
    },
  );
});

describe('hosts', () => {
  it('a host containing "/" is percent-encoded whole and read back', () => {
    const c = conn({ conn_type: 'http', host: 'example.com/api/v1', port: 443 });
    const uri = formatConnectionUri(c);
    expect(uri).toBe('http://example.com%2Fapi%2Fv1:443');
    expect(parseConnectionUri(uri)).toEqual(c);
  });

  it('a host containing ":" (IPv6) is percent-encoded and read back', () => {
    const c = conn({ conn_type: 'postgres', host: 'fe80::1', port: 5432 });
    const uri = formatConnectionUri(c);
    expect(uri).toBe('postgres://fe80%3A%3A1:5432');
    expect(parseConnectionUri(uri)).toEqual(c);
  });

  it('a host with a protocol is written type://protocol://user:pass@host:port/schema, as get_uri does', () => {
    const c = conn({
      conn_type: 'http',
      host: 'https://api.example.com',
      login: 'u',
      password: 'p w',
      port: 8443,
      schema: 'v1',
    });
    const uri = formatConnectionUri(c);
    expect(uri).toBe('http://https://u:p%20w@api.example.com:8443/v1');
    expect(parseConnectionUri(uri)).toEqual(c);
    expect(
      formatConnectionUri(conn({ conn_type: 'spark', host: 'k8s://100.68.0.1', port: 443 })),
    ).toBe('spark://k8s://100.68.0.1:443');
  });

  it('a protocol that ends in the type, or is no scheme, is encoded whole (Airflow reads both back)', () => {
    // Airflow's parser strips every "http://" from "http://http://x", so that form cannot be used.
    const same = conn({ conn_type: 'http', host: 'http://x.example' });
    expect(formatConnectionUri(same)).toBe('http://http%3A%2F%2Fx.example');
    expect(parseConnectionUri(formatConnectionUri(same))).toEqual(same);
    const odd = conn({ conn_type: 'http', host: 'a b://X' });
    expect(formatConnectionUri(odd)).toBe('http://a%20b%3A%2F%2FX');
    expect(parseConnectionUri(formatConnectionUri(odd))).toEqual(odd);
  });

  it("reads Airflow's protocol form <type>://<protocol>://host into the host", () => {
    expect(parseConnectionUri('http://https://user:pw@api.example.com:8443/v1')).toEqual(
      conn({
        conn_type: 'http',
        host: 'https://api.example.com',
        login: 'user',
        password: 'pw',
        port: 8443,
        schema: 'v1',
      }),
    );
  });

  it('drops a protocol that has no host after it, as Airflow does', () => {
    expect(parseConnectionUri('http://https://').host).toBe('');
  });

  it('reads a bracketed IPv6 literal without its brackets', () => {
    expect(parseConnectionUri('postgres://u@[::1]:5432/db')).toEqual(
      conn({ conn_type: 'postgres', login: 'u', host: '::1', port: 5432, schema: 'db' }),
    );
  });

  it('lower-cases a host as urlsplit().hostname does', () => {
    expect(parseConnectionUri('mysql://DB.Example.COM').host).toBe('db.example.com');
    expect(parseConnectionUri('http://HTTPS://U:P@Api.Example.COM').host).toBe(
      'https://api.example.com',
    );
    expect(normalizeConnection(conn({ host: 'DB.Example.COM' })).host).toBe('db.example.com');
    expect(formatConnectionUri(conn({ host: 'DB.Example.COM' }))).toBe('generic://DB.Example.COM');
  });

  it('only the text before the first "%" is lower-cased; a host holding "/" keeps its case', () => {
    // hostname: "AB%C3%89x" → "ab%C3%89x" → "abÉx"; an IPv6 zone after "%25" keeps its case.
    expect(parseConnectionUri('x://AB%C3%89X').host).toBe('abÉX');
    expect(parseConnectionUri('x://[FE80::1%25Eth0]:1').host).toBe('fe80::1%Eth0');
    expect(parseConnectionUri('x://Sock%2FPath%2FDB').host).toBe('Sock/Path/DB');
    expect(normalizeConnection(conn({ host: 'Host:Port' })).host).toBe('host:Port');
    expect(normalizeConnection(conn({ host: '/Tmp/Sock' })).host).toBe('/Tmp/Sock');
  });

  it('empty host: only a port (the "@" get_uri writes gives login "")', () => {
    const c = conn({ conn_type: 'redis', port: 6379 });
    const uri = formatConnectionUri(c);
    expect(uri).toBe('redis://@:6379');
    expect(parseConnectionUri(uri)).toEqual({ ...c, login: '' });
    expect(normalizeConnection(c)).toEqual({ ...c, login: '' });
  });

  it('empty host: login and schema only', () => {
    const c = conn({ conn_type: 'sqlite', login: 'u', schema: '/tmp/db.sqlite' });
    const uri = formatConnectionUri(c);
    expect(uri).toBe('sqlite://u@/%2Ftmp%2Fdb.sqlite');
    expect(parseConnectionUri(uri)).toEqual(c);
  });

  it('empty host: password only (login "" before the ":")', () => {
    const c = conn({ conn_type: 'redis', password: 's3cret', port: 6379 });
    expect(formatConnectionUri(c)).toBe('redis://:s3cret@:6379');
    expect(parseConnectionUri(formatConnectionUri(c))).toEqual({ ...c, login: '' });
  });

  it('type only: "<scheme>://" and the bare "<scheme>:" both parse', () => {
    expect(formatConnectionUri(conn({ conn_type: 'generic' }))).toBe('generic://');
    expect(parseConnectionUri('generic://')).toEqual(conn({ conn_type: 'generic' }));
    expect(parseConnectionUri('generic:')).toEqual(conn({ conn_type: 'generic' }));
  });
});

describe('passwords with every special character', () => {
  const ascii = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)).join(
    '',
  );
  it.each([
    ['every printable ASCII character', ascii],
    ['unicode and emoji', 'pä$$wörd-密码-😀'],
    ['percent signs that look like escapes', '%41%zz%'],
    ['plus and spaces', 'a+b c++ '],
    ['reserved characters', ":/?#[]@!$&'()*+,;="],
  ])('%s', (_, password) => {
    const c = conn({ conn_type: 'postgres', login: password, password, host: 'h', port: 5432 });
    const uri = formatConnectionUri(c);
    expect(uri).toMatch(/^postgres:\/\/[A-Za-z0-9%._~-]*:[A-Za-z0-9%._~-]*@h:5432$/);
    expect(parseConnectionUri(uri)).toEqual(c);
  });

  it('a raw "@" and ":" in an unencoded password still parse (last "@", first ":")', () => {
    expect(parseConnectionUri('postgres://user:p@ss:word@host:5432/db')).toMatchObject({
      login: 'user',
      password: 'p@ss:word',
      host: 'host',
    });
  });

  it("Python quote() escapes ! ' ( ) * that encodeURIComponent leaves alone", () => {
    expect(formatConnectionUri(conn({ password: "!'()*" }))).toBe('generic://:%21%27%28%29%2A@');
  });
});

describe('query parameters as extra', () => {
  it('plain parameters become string extras', () => {
    expect(parseConnectionUri('http://h?a=1&b=2').extra).toEqual({ a: '1', b: '2' });
  });

  it('a repeated key keeps its last value (dict(parse_qsl(...)), not a list)', () => {
    expect(parseConnectionUri('http://h?a=1&a=2&b=3').extra).toEqual({ a: '2', b: '3' });
  });

  it('a parameter without "=" is an empty string (keep_blank_values)', () => {
    expect(parseConnectionUri('http://h?flag&x=').extra).toEqual({ flag: '', x: '' });
  });

  it('"+" is a space in the query but not in the userinfo', () => {
    const c = parseConnectionUri('http://a+b:c+d@h?k=v+w&k%2B=%2B');
    expect(c.login).toBe('a+b');
    expect(c.password).toBe('c+d');
    expect(c.extra).toEqual({ k: 'v w', 'k+': '+' });
  });

  it('__extra__ wins; other parameters beside it are ignored, as in Airflow', () => {
    expect(parseConnectionUri('http://h?a=1&__extra__=%7B%22b%22%3A2%7D').extra).toEqual({ b: 2 });
  });

  it('an empty query is no extra; "?&" is an empty extra', () => {
    expect(parseConnectionUri('http://h?').extra).toBeNull();
    expect(parseConnectionUri('http://h/?').extra).toBeNull();
    expect(parseConnectionUri('http://h?&').extra).toEqual({});
  });

  it('extra {} and null are distinct on the wire', () => {
    expect(formatConnectionUri(conn({ extra: {} }))).toBe('generic:///?__extra__=%7B%7D');
    expect(parseConnectionUri('generic:///?__extra__=%7B%7D').extra).toEqual({});
    expect(formatConnectionUri(conn({ extra: null }))).toBe('generic://');
  });

  it('non-string values, nesting and a key named __extra__ use the JSON form', () => {
    for (const extra of [
      { n: 1 },
      { a: { b: 'c' } },
      { l: ['x'] },
      { __extra__: 'x' },
      { t: true },
    ]) {
      const uri = formatConnectionUri(conn({ extra }));
      expect(uri).toContain('?__extra__=');
      expect(parseConnectionUri(uri).extra).toEqual(extra);
    }
  });

  it('a "__proto__" key stays an ordinary key', () => {
    const extra = JSON.parse('{"__proto__":"x","a":"b"}') as Record<string, unknown>;
    const back = parseConnectionUri(formatConnectionUri(conn({ extra }))).extra!;
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.keys(back)).toEqual(['__proto__', 'a']);
    const plain = parseConnectionUri('http://h?__proto__=x').extra!;
    expect(Object.getPrototypeOf(plain)).toBe(Object.prototype);
    expect(Object.keys(plain)).toEqual(['__proto__']);
  });

  it('uses "/?" before the query when there is no schema, "?" after a schema', () => {
    expect(formatConnectionUri(conn({ host: 'h', extra: { a: 'b' } }))).toBe('generic://h/?a=b');
    expect(formatConnectionUri(conn({ host: 'h', schema: 's', extra: { a: 'b' } }))).toBe(
      'generic://h/s?a=b',
    );
  });
});

describe('ports', () => {
  it('port 0 is written and read (Airflow 3 writes it; 2.x parsers read it)', () => {
    const c = conn({ host: 'h', port: 0 });
    expect(formatConnectionUri(c)).toBe('generic://h:0');
    expect(parseConnectionUri('generic://h:0')).toEqual(c);
  });

  it('leading zeros and the maximum are accepted', () => {
    expect(parseConnectionUri('x://h:0080').port).toBe(80);
    expect(parseConnectionUri('x://h:65535').port).toBe(65535);
  });

  it('an empty port is no port', () => {
    expect(parseConnectionUri('x://h:/db').port).toBeNull();
  });
});

describe('malformed URIs: errors never contain the input', () => {
  it.each([
    ['empty', ''],
    ['whitespace', '  \t\n '],
    ['no scheme', 'host:5432'],
    ['no scheme, userinfo', 'user:hunter2secret@host'],
    ['scheme without //', 'postgres:user:hunter2secret@host'],
    ['non-numeric port', 'postgres://h:abc/db'],
    ['port with a sign', 'postgres://h:+5432/db'],
    ['port out of range', 'postgres://user:hunter2secret@h:65536/db'],
    ['bad percent escape in password', 'postgres://user:hunter2%zzsecret@h/db'],
    ['truncated escape', 'postgres://user:hunter2secret%4@h/db'],
    ['escape that is not UTF-8', 'postgres://user:hunter2%C3secret@h/db'],
    ['UTF-8-encoded surrogate', 'postgres://user:hunter2%ED%A0%80secret@h/db'],
    ['bad escape in the query', 'postgres://h/db?password=hunter2%GGsecret'],
    ['bad __extra__ JSON', 'postgres://h/db?__extra__=%7Bhunter2secret'],
    ['__extra__ not an object', 'postgres://h/db?__extra__=%5B%22hunter2secret%22%5D'],
    ['raw "#" in a password', 'postgres://user:hunter2#secret@h/db'],
    ['raw "/" in a password', 'postgres://user:hunter2/secret@h/db'],
    ['unclosed IPv6 bracket', 'postgres://user:hunter2secret@[::1/db'],
    ['stray bracket', 'postgres://user:hunter2secret@h]x/db'],
    ['three "://"', 'a://b://c://hunter2secret'],
    ['"://" inside the userinfo', 'a://user:hunter2://secret@h'],
    ['control character', 'postgres://user:hunter2\tsecret@h/db'],
    ['scheme starting with a digit', '1postgres://user:hunter2secret@h'],
    ['lone surrogate', 'postgres://user:hunter2\ud800secret@h'],
  ])('%s', (_, input) => {
    const message = expectSafeError(() => parseConnectionUri(input), 'LF_CONN_URI_INVALID', input);
    expect(message).not.toContain('hunter2');
    expect(message).toContain(
      'expected <conn_type>://[login[:password]@]host[:port][/schema][?extra]',
    );
  });

  it('says what is wrong', () => {
    expect(() => parseConnectionUri('postgres://h:abc/db')).toThrow(/port is not an integer/);
    expect(() => parseConnectionUri('')).toThrow(/empty/);
    expect(() => parseConnectionUri('host:5432')).toThrow(/followed by ":\/\/"/);
  });
});

describe('formatting errors', () => {
  it.each([
    ['empty conn_type', conn({ conn_type: '' })],
    ['conn_type with a space', conn({ conn_type: 'my type' })],
    ['conn_type starting with a digit', conn({ conn_type: '9db' })],
    ['conn_type starting with "_"', conn({ conn_type: '_x' })],
    ['fractional port', conn({ port: 1.5 })],
    ['negative port', conn({ port: -1 })],
    ['port too large', conn({ port: 70000 })],
    ['lone surrogate in password', conn({ password: 'a\ud800b' })],
    ['lone surrogate in host', conn({ host: '\udc00' })],
    ['array extra', conn({ extra: [] as unknown as Record<string, unknown> })],
    ['BigInt in extra', conn({ extra: { n: 1n } })],
  ])('%s → LF_CONN_URI_INVALID', (_, c) => {
    expect(() => formatConnectionUri(c)).toThrow(
      expect.objectContaining({ code: 'LF_CONN_URI_INVALID' }),
    );
  });

  it('a lone surrogate inside extra is carried by the JSON form', () => {
    const c = conn({ extra: { k: 'a\ud800' } });
    expect(parseConnectionUri(formatConnectionUri(c))).toEqual(c);
  });
});

describe('normalisation rules', () => {
  it('conn_type: lower-cased, "-" and "_" both become "_", postgresql → postgres', () => {
    for (const [given, read] of [
      ['my-conn-type', 'my_conn_type'],
      ['Google_Cloud_Platform', 'google_cloud_platform'],
      ['postgresql', 'postgres'],
      ['PostgreSQL', 'postgres'],
      ['a.b+c', 'a.b+c'],
    ]) {
      const c = conn({ conn_type: given! });
      expect(parseConnectionUri(formatConnectionUri(c)).conn_type).toBe(read);
      expect(normalizeConnection(c).conn_type).toBe(read);
    }
  });

  it('None and "" as get_uri writes them and Connection(uri=…) reads them', () => {
    // login/password are written when not None; host and schema only when non-empty.
    // A password "" is not written: core reads `:@` as None, the task SDK as "" (the Airflow
    // oracle shows both), so only leaving it out reads the same in both.
    const c = conn({ host: '', login: '', password: '', schema: '' });
    expect(formatConnectionUri(c)).toBe('generic://@');
    expect(parseConnectionUri('generic://:@')).toEqual(conn({ login: '' }));
    expect(normalizeConnection(c)).toEqual(conn({ login: '' }));
    const nulls = conn({ host: null, schema: null });
    expect(formatConnectionUri(nulls)).toBe('generic://');
    expect(parseConnectionUri('generic://')).toEqual(base);
    expect(normalizeConnection(nulls)).toEqual(base);
    // A login "" alone keeps its "@" (get_uri would drop it and Airflow would read None).
    expect(formatConnectionUri(conn({ login: '' }))).toBe('generic://@');
    expect(parseConnectionUri('generic://@')).toEqual(conn({ login: '' }));
  });

  it('x://:@/ is login "", password None (the setter ignores ""), host "" and schema ""', () => {
    expect(parseConnectionUri('x://:@/')).toEqual(conn({ conn_type: 'x', login: '' }));
  });

  it('leading whitespace and a trailing newline are ignored; trailing spaces are kept, as urlsplit keeps them', () => {
    expect(parseConnectionUri('  postgres://h/db\r\n')).toEqual(
      conn({ conn_type: 'postgres', host: 'h', schema: 'db' }),
    );
    expect(parseConnectionUri('postgres://h/db ')).toEqual(
      conn({ conn_type: 'postgres', host: 'h', schema: 'db ' }),
    );
  });
});

/**
 * The cases of Airflow's own tests (`tests/unit/always/test_connection.py`:
 * `test_connection_from_uri`, `test_connection_from_with_auth_info`), with the fields
 * `Connection(uri=…)` gives — None and "" as Airflow has them.
 */
describe("Airflow's test_connection.py URI cases", () => {
  const A = (c: Partial<Connection>): Connection => ({
    conn_type: 'scheme',
    host: '',
    login: null,
    password: null,
    schema: '',
    port: null,
    extra: null,
    ...c,
  });
  it.each<[string, string, Connection]>([
    [
      'without extras',
      'scheme://user:password@host%2Flocation:1234/schema',
      A({
        host: 'host/location',
        schema: 'schema',
        login: 'user',
        password: 'password',
        port: 1234,
      }),
    ],
    [
      'with extras',
      'scheme://user:password@host%2Flocation:1234/schema?extra1=a%20value&extra2=%2Fpath%2F',
      A({
        host: 'host/location',
        schema: 'schema',
        login: 'user',
        password: 'password',
        port: 1234,
        extra: { extra1: 'a value', extra2: '/path/' },
      }),
    ],
    [
      'with nested json',
      'scheme://user:password@host%2Flocation:1234/schema?__extra__=%7B%22my_val%22%3A+%5B%22list%22%2C+%22of%22%2C+%22values%22%5D%2C+%22extra%22%3A+%7B%22nested%22%3A+%7B%22json%22%3A+%22val%22%7D%7D%7D',
      A({
        host: 'host/location',
        schema: 'schema',
        login: 'user',
        password: 'password',
        port: 1234,
        extra: { my_val: ['list', 'of', 'values'], extra: { nested: { json: 'val' } } },
      }),
    ],
    [
      'with empty extras',
      'scheme://user:password@host%2Flocation:1234/schema?extra1=a%20value&extra2=',
      A({
        host: 'host/location',
        schema: 'schema',
        login: 'user',
        password: 'password',
        port: 1234,
        extra: { extra1: 'a value', extra2: '' },
      }),
    ],
    [
      'with colon in hostname',
      'scheme://user:password@host%2Flocation%3Ax%3Ay:1234/schema',
      A({
        host: 'host/location:x:y',
        schema: 'schema',
        login: 'user',
        password: 'password',
        port: 1234,
      }),
    ],
    [
      'with encoded password',
      'scheme://user:password%20with%20space@host%2Flocation%3Ax%3Ay:1234/schema',
      A({
        host: 'host/location:x:y',
        schema: 'schema',
        login: 'user',
        password: 'password with space',
        port: 1234,
      }),
    ],
    [
      'with encoded user',
      'scheme://domain%2Fuser:password@host%2Flocation%3Ax%3Ay:1234/schema',
      A({
        host: 'host/location:x:y',
        schema: 'schema',
        login: 'domain/user',
        password: 'password',
        port: 1234,
      }),
    ],
    [
      'with encoded schema',
      'scheme://user:password%20with%20space@host:1234/schema%2Ftest',
      A({
        host: 'host',
        schema: 'schema/test',
        login: 'user',
        password: 'password with space',
        port: 1234,
      }),
    ],
    [
      'no schema',
      'scheme://user:password%20with%20space@host:1234',
      A({ host: 'host', login: 'user', password: 'password with space', port: 1234 }),
    ],
    [
      'with underscore',
      'google-cloud-platform://?key_path=%2Fkeys%2Fkey.json&scope=https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fcloud-platform&project=airflow',
      A({
        conn_type: 'google_cloud_platform',
        extra: {
          key_path: '/keys/key.json',
          scope: 'https://www.googleapis.com/auth/cloud-platform',
          project: 'airflow',
        },
      }),
    ],
    ['without auth info', 'scheme://host:1234', A({ host: 'host', port: 1234 })],
    ['with path', 'scheme://%2FTmP%2F:1234', A({ host: '/TmP/', port: 1234 })],
    ['schema only', 'scheme:///airflow', A({ schema: 'airflow' })],
    ['port only', 'scheme://@:1234', A({ login: '', port: 1234 })],
    [
      'password only',
      'scheme://:password%2F%21%40%23%24%25%5E%26%2A%28%29%7B%7D@',
      A({ login: '', password: 'password/!@#$%^&*(){}' }),
    ],
    [
      'login only',
      'scheme://login%2F%21%40%23%24%25%5E%26%2A%28%29%7B%7D@',
      A({ login: 'login/!@#$%^&*(){}' }),
    ],
    [
      'empty login before ":"',
      'http://:password@host:80/database',
      A({
        conn_type: 'http',
        login: '',
        password: 'password',
        host: 'host',
        port: 80,
        schema: 'database',
      }),
    ],
    [
      'empty password after ":"',
      'http://user:@host:80/database',
      A({ conn_type: 'http', login: 'user', host: 'host', port: 80, schema: 'database' }),
    ],
    [
      'no host',
      'http://user:password@/database',
      A({ conn_type: 'http', login: 'user', password: 'password', schema: 'database' }),
    ],
    [
      'path "/" alone',
      'http://user:password@host:80/',
      A({ conn_type: 'http', login: 'user', password: 'password', host: 'host', port: 80 }),
    ],
    [
      'a socket path as host',
      'postgresql://user:password@%2Ftmp%2Fz6rqdzqh%2Fexample%3Awest1%3Atestdb/testdb',
      A({
        conn_type: 'postgres',
        login: 'user',
        password: 'password',
        host: '/tmp/z6rqdzqh/example:west1:testdb',
        schema: 'testdb',
      }),
    ],
    [
      'a socket path without userinfo',
      'postgresql://%2Ftmp%2Fz6rqdzqh%2Fexample%3Aeurope-west1%3Atestdb',
      A({ conn_type: 'postgres', host: '/tmp/z6rqdzqh/example:europe-west1:testdb' }),
    ],
    [
      'an encoded protocol in the host',
      'spark://user:password@k8s%3a%2F%2F100.68.0.1:443?deploy-mode=cluster',
      A({
        conn_type: 'spark',
        login: 'user',
        password: 'password',
        host: 'k8s://100.68.0.1',
        port: 443,
        extra: { 'deploy-mode': 'cluster' },
      }),
    ],
    [
      'an encoded protocol, no port',
      'spark://k8s%3a%2F%2Fno.port.com?deploy-mode=cluster',
      A({ conn_type: 'spark', host: 'k8s://no.port.com', extra: { 'deploy-mode': 'cluster' } }),
    ],
    [
      'the env-var example',
      'postgresql://username:password%21@ec2.compute.com:5432/the_database',
      A({
        conn_type: 'postgres',
        login: 'username',
        password: 'password!',
        host: 'ec2.compute.com',
        port: 5432,
        schema: 'the_database',
      }),
    ],
  ])('%s', (_, uri, expected) => {
    const c = parseConnectionUri(uri);
    expect(c).toEqual(expected);
    // test_connection_get_uri_from_uri: get_uri then parse gives the same connection.
    expect(parseConnectionUri(formatConnectionUri(c))).toEqual(c);
  });

  it('test_connection_get_uri_from_conn: fields → get_uri → the same fields', () => {
    const c = A({
      host: 'host',
      login: 'user',
      password: 'password',
      port: 1234,
      schema: 'schema',
    });
    expect(formatConnectionUri(c)).toBe('scheme://user:password@host:1234/schema');
    expect(parseConnectionUri(formatConnectionUri(c))).toEqual(c);
  });

  it('an extra that cannot be flat parameters is json.dumps text, form-encoded with "+"', () => {
    // Connection(extra={"foo": "bar", "answer": 42}).get_uri()
    const c = A({ conn_type: 'bar', host: 'example.org', extra: { foo: 'bar', answer: 42 } });
    expect(formatConnectionUri(c)).toBe(
      'bar://example.org/?__extra__=%7B%22foo%22%3A+%22bar%22%2C+%22answer%22%3A+42%7D',
    );
    expect(formatConnectionUri(A({ extra: { a: [1, 2.5, 'é'], b: null, c: true } }))).toBe(
      'scheme:///?__extra__=%7B%22a%22%3A+%5B1%2C+2.5%2C+%22%5Cu00e9%22%5D%2C+%22b%22%3A+null%2C+%22c%22%3A+true%7D',
    );
  });
});
