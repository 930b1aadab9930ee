import { describe, expect, it } from 'vitest';
import {
  isLeoflowError,
  parseAirflowConnectionsExport,
  type ConnectionsExportFormat,
  type ImportIssue,
} from '@leoflow/core';

// Written by `airflow connections export --file-format json` (json.dumps(…, indent=2)).
const JSON_EXPORT = `{
  "aws_default": {
    "conn_type": "aws",
    "description": null,
    "login": null,
    "password": null,
    "host": null,
    "port": null,
    "schema": null,
    "extra": "{\\"region_name\\": \\"eu-west-1\\"}"
  },
  "google_cloud_default": {
    "conn_type": "google_cloud_platform",
    "description": "GCP (keyless)",
    "login": null,
    "password": null,
    "host": null,
    "port": null,
    "schema": null,
    "extra": "{\\"project\\": \\"acme-prod\\", \\"scope\\": \\"https://www.googleapis.com/auth/cloud-platform\\", \\"num_retries\\": 5}"
  },
  "pg_main": {
    "conn_type": "postgres",
    "description": "",
    "login": "etl",
    "password": "p@ss:w/rd#1",
    "host": "db.internal",
    "port": 5432,
    "schema": "warehouse",
    "extra": null
  }
}`;

// Written by `--file-format yaml` (PyYAML yaml.dump: sorted keys, a long extra folded).
const YAML_EXPORT = `aws_default:
  conn_type: aws
  description: null
  extra: '{"region_name": "eu-west-1"}'
  host: null
  login: null
  password: null
  port: null
  schema: null
google_cloud_default:
  conn_type: google_cloud_platform
  description: GCP (keyless)
  extra: '{"project": "acme-prod", "scope": "https://www.googleapis.com/auth/cloud-platform",
    "num_retries": 5}'
  host: null
  login: null
  password: null
  port: null
  schema: null
pg_main:
  conn_type: postgres
  description: ''
  extra: null
  host: db.internal
  login: etl
  password: p@ss:w/rd#1
  port: 5432
  schema: warehouse
`;

// Written by `--file-format env` (conn_id=get_uri(), one per line).
const ENV_EXPORT = `aws_default=aws:///?region_name=eu-west-1
google_cloud_default=google-cloud-platform:///?__extra__=%7B%22project%22%3A+%22acme-prod%22%2C+%22scope%22%3A+%22https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fcloud-platform%22%2C+%22num_retries%22%3A+5%7D
pg_main=postgres://etl:p%40ss%3Aw%2Frd%231@db.internal:5432/warehouse
`;

const EXPECTED = [
  {
    id: 'aws_default',
    conn: {
      conn_type: 'aws',
      host: null,
      login: null,
      password: null,
      schema: null,
      port: null,
      extra: { region_name: 'eu-west-1' },
    },
  },
  {
    id: 'google_cloud_default',
    conn: {
      conn_type: 'google_cloud_platform',
      host: null,
      login: null,
      password: null,
      schema: null,
      port: null,
      extra: {
        project: 'acme-prod',
        scope: 'https://www.googleapis.com/auth/cloud-platform',
        num_retries: 5,
      },
    },
  },
  {
    id: 'pg_main',
    conn: {
      conn_type: 'postgres',
      host: 'db.internal',
      login: 'etl',
      password: 'p@ss:w/rd#1',
      schema: 'warehouse',
      port: 5432,
      extra: null,
    },
  },
];
const withDescription = (e: (typeof EXPECTED)[number]) =>
  e.id === 'google_cloud_default' ? { ...e, description: 'GCP (keyless)' } : e;

function issuesOf(text: string, format: ConnectionsExportFormat): ImportIssue[] {
  try {
    parseAirflowConnectionsExport(text, format);
  } catch (e) {
    expect(isLeoflowError(e)).toBe(true);
    if (!isLeoflowError(e)) return [];
    expect(e.code).toBe('LF_CONN_IMPORT_INVALID');
    expect(e.message).not.toContain('hunter2');
    expect(JSON.stringify(e.details)).not.toContain('hunter2');
    return e.details['issues'] as ImportIssue[];
  }
  throw new Error('expected an error');
}

describe('parseAirflowConnectionsExport', () => {
  it('json: the file `airflow connections export` writes', () => {
    expect(parseAirflowConnectionsExport(JSON_EXPORT, 'json')).toEqual(
      EXPECTED.map(withDescription),
    );
  });

  it('yaml: the file `airflow connections export --file-format yaml` writes', () => {
    expect(parseAirflowConnectionsExport(YAML_EXPORT, 'yaml')).toEqual(
      EXPECTED.map(withDescription),
    );
  });

  it('env: conn_id=<URI> lines (a URI has host and schema "" where the JSON form has null)', () => {
    expect(parseAirflowConnectionsExport(ENV_EXPORT, 'env')).toEqual(
      EXPECTED.map((e) => ({
        ...e,
        conn: { ...e.conn, host: e.conn.host ?? '', schema: e.conn.schema ?? '' },
      })),
    );
  });

  it("an entry without conn_type names the field: the vault, like Airflow's database, needs a type", () => {
    const issues = issuesOf('{"a": {"host": "h"}, "b": "{\\"host\\": \\"h\\"}"}', 'json');
    expect(issues).toEqual([
      { id: 'a', line: 1, problem: expect.stringMatching(/^conn_type is missing; .*database/) },
      { id: 'b', line: 1, problem: expect.stringMatching(/^conn_type is missing/) },
    ]);
  });

  it('env: conn_id=<JSON> lines (--serialization-format json), CRLF, comments, blanks', () => {
    const text =
      '# exported\r\n\r\n' +
      'pg_json={"conn_type": "postgres", "description": null, "login": "etl", "password": "p@ss:w/rd#1", "host": "db.internal", "port": 5432, "schema": "warehouse", "extra": null}\r\n' +
      '  # indented comment\r\n';
    expect(parseAirflowConnectionsExport(text, 'env')).toEqual([
      { id: 'pg_json', conn: EXPECTED[2]!.conn },
    ]);
  });

  it('env: a value may itself contain "=" (split on the first one)', () => {
    expect(parseAirflowConnectionsExport('x=http://h?a=b=c', 'env')[0]!.conn.extra).toEqual({
      a: 'b=c',
    });
  });

  it('json/yaml: a URI string as the value, extra as an object, extra_dejson, uri, conn_id', () => {
    const text = JSON.stringify({
      a: 'postgres://u:p@h:5432/db',
      b: { conn_type: 'http', extra: { k: 1 } },
      c: { conn_type: 'http', extra_dejson: { k: 2 } },
      d: { uri: 'mysql://h/db', description: 'via uri' },
      e: { conn_id: 'e', conn_type: 'generic' },
      f: ['generic://'],
    });
    const got = parseAirflowConnectionsExport(text, 'json');
    expect(got.map((g) => g.id)).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(got[0]!.conn).toMatchObject({ conn_type: 'postgres', login: 'u', port: 5432 });
    expect(got[1]!.conn.extra).toEqual({ k: 1 });
    expect(got[2]!.conn.extra).toEqual({ k: 2 });
    expect(got[3]).toMatchObject({ description: 'via uri', conn: { conn_type: 'mysql' } });
    expect(got[4]!.conn.conn_type).toBe('generic');
    expect(got[5]!.conn.conn_type).toBe('generic');
  });

  it('json: keeps file order, including integer-like ids', () => {
    const got = parseAirflowConnectionsExport('{"b":"x://","10":"x://","2":"x://"}', 'json');
    expect(got.map((g) => g.id)).toEqual(['b', '10', '2']);
  });

  it('yaml: YAML 1.1 as PyYAML reads it ("no" is a boolean, refused as a password)', () => {
    const issues = issuesOf('c:\n  conn_type: http\n  password: no\n', 'yaml');
    expect(issues).toEqual([
      { id: 'c', line: 1, problem: 'password must be a string or null (quote it in YAML)' },
    ]);
  });
});

describe('import errors name the entry and line, never the value', () => {
  it('env: every bad line is reported at once', () => {
    const text = [
      'ok=postgres://u:p@h/db', // 1
      'justapassword-hunter2', // 2: no "="
      '=postgres://h', // 3: empty id
      'bad id=postgres://h', // 4: invalid id
      'pg=postgres://u:hunter2@h:abc/db', // 5: bad port
      'ok=postgres://h', // 6: duplicate
      'empty=', // 7: empty value
      'js={"conn_type": "x", "port": "hunter2"}', // 8: bad JSON port
      'pct=postgres://u:hunter2%zz@h', // 9: bad escape
    ].join('\n');
    expect(issuesOf(text, 'env')).toEqual([
      { id: null, line: 2, problem: expect.stringMatching(/no "="/) },
      { id: null, line: 3, problem: expect.stringMatching(/empty/) },
      { id: null, line: 4, problem: expect.stringMatching(/not valid/) },
      { id: 'pg', line: 5, problem: 'the port is not an integer' },
      { id: 'ok', line: 6, problem: 'the connection id appears again (first on line 1)' },
      { id: 'empty', line: 7, problem: 'the value after "=" is empty' },
      { id: 'js', line: 8, problem: 'port must be an integer' },
      { id: 'pct', line: 9, problem: expect.stringMatching(/percent-escape/) },
    ]);
  });

  it('env: the message names lines and ids', () => {
    try {
      parseAirflowConnectionsExport('a=x://\npg=postgres://u:hunter2@h:abc/db', 'env');
    } catch (e) {
      expect((e as Error).message).toMatch(/line 2, "pg": the port is not an integer/);
      return;
    }
    throw new Error('expected an error');
  });

  it('json: entry problems carry the line of their key', () => {
    const text = `{
  "good": {"conn_type": "http"},
  "no_type": {"password": "hunter2"},
  "float_port": {"conn_type": "x", "port": 5432.0, "password": "hunter2"},
  "bad uri": "hunter2",
  "num": 42,
  "nan": {"conn_type": "x", "extra": {"a": NaN}},
  "mismatch": {"conn_id": "other", "conn_type": "x"},
  "both": {"conn_type": "x", "extra": {}, "extra_dejson": {}},
  "uri_mix": {"uri": "x://", "host": "hunter2"},
  "unknown": {"conn_type": "x", "hunter2": 1},
  "two": ["x://", "y://"]
}`;
    expect(issuesOf(text, 'json')).toEqual([
      { id: 'no_type', line: 3, problem: expect.stringMatching(/conn_type is missing/) },
      { id: 'float_port', line: 4, problem: 'port must be an integer' },
      { id: null, line: 5, problem: expect.stringMatching(/connection id is not valid/) },
      { id: 'num', line: 6, problem: expect.stringMatching(/URI string or an object/) },
      { id: 'nan', line: 7, problem: expect.stringMatching(/NaN or Infinity/) },
      { id: 'mismatch', line: 8, problem: expect.stringMatching(/conn_id field differs/) },
      { id: 'both', line: 9, problem: expect.stringMatching(/mutually exclusive/) },
      { id: 'uri_mix', line: 10, problem: expect.stringMatching(/either uri or/) },
      { id: 'unknown', line: 11, problem: expect.stringMatching(/not one of/) },
      { id: 'two', line: 12, problem: expect.stringMatching(/several values/) },
    ]);
  });

  it('json: a syntax error gives its line, not the text', () => {
    expect(issuesOf('{\n  "a": {"conn_type": "x",\n  "password": hunter2}\n}', 'json')).toEqual([
      { id: null, line: 3, problem: expect.stringMatching(/^not valid JSON: expected a value/) },
    ]);
  });

  it.each<[ConnectionsExportFormat, string]>([
    ['json', ''],
    ['json', '["hunter2"]'],
    ['yaml', '   \n'],
    ['yaml', '- hunter2\n'],
  ])('%s: empty or not a mapping (%j)', (format, text) => {
    expect(issuesOf(text, format)).toHaveLength(1);
  });

  it('yaml: a syntax error gives its line and code, not the text', () => {
    const issues = issuesOf('a:\n  conn_type: x\n  password: "hunter2\n', 'yaml');
    expect(issues[0]).toMatchObject({
      id: null,
      problem: expect.stringMatching(/^not valid YAML \(/),
    });
  });

  it('yaml: a duplicate id is refused', () => {
    expect(issuesOf('a: x://\na: y://\n', 'yaml')).toEqual([
      { id: null, line: 2, problem: 'the connection id appears more than once' },
    ]);
  });

  it('yaml: a non-string id is refused', () => {
    expect(issuesOf('123: x://\n', 'yaml')).toEqual([
      { id: null, line: 1, problem: expect.stringMatching(/not a string/) },
    ]);
  });

  it('an unknown format is refused', () => {
    expect(() => parseAirflowConnectionsExport('', 'toml' as ConnectionsExportFormat)).toThrow(
      /json, yaml, env/,
    );
  });
});
