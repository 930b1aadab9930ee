import { describe, expect, it } from 'vitest';
import {
  connectionEnvName,
  formatConnectionUri,
  fromAirflowEnv,
  isLeoflowError,
  variableEnvName,
  type ImportIssue,
} from '@leoflow/core';

describe('connectionEnvName / variableEnvName', () => {
  it('upper-case the id, as Airflow looks it up', () => {
    expect(connectionEnvName('google_cloud_default')).toBe('AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT');
    expect(variableEnvName('my_key')).toBe('AIRFLOW_VAR_MY_KEY');
  });

  it('keep characters a shell cannot export, because Airflow looks them up verbatim', () => {
    expect(connectionEnvName('my-db.v2:ro')).toBe('AIRFLOW_CONN_MY-DB.V2:RO');
    expect(variableEnvName('feature.flag-x')).toBe('AIRFLOW_VAR_FEATURE.FLAG-X');
  });

  it('upper-case Unicode like Python str.upper()', () => {
    expect(connectionEnvName('straße')).toBe('AIRFLOW_CONN_STRASSE');
  });

  it.each(['', 'a=b', 'a\u0000b'])('refuse %j with LF_ENV_NAME_INVALID', (name) => {
    expect(() => connectionEnvName(name)).toThrow(
      expect.objectContaining({ code: 'LF_ENV_NAME_INVALID' }),
    );
    expect(() => variableEnvName(name)).toThrow(
      expect.objectContaining({ code: 'LF_ENV_NAME_INVALID' }),
    );
  });
});

function envIssues(env: Record<string, string | undefined>): ImportIssue[] {
  try {
    fromAirflowEnv(env);
  } catch (e) {
    expect(isLeoflowError(e)).toBe(true);
    if (!isLeoflowError(e)) return [];
    expect(e.code).toBe('LF_ENV_IMPORT_INVALID');
    expect(e.message).not.toContain('hunter2');
    expect(JSON.stringify(e.details)).not.toContain('hunter2');
    return e.details['issues'] as ImportIssue[];
  }
  throw new Error('expected an error');
}

describe('fromAirflowEnv', () => {
  it('reads AIRFLOW_CONN_* (URI and JSON) and AIRFLOW_VAR_*, ids lower-cased, sorted; an empty AIRFLOW_CONN_ value is not found', () => {
    const got = fromAirflowEnv({
      PATH: '/usr/bin',
      AIRFLOW_VAR_MY_KEY: 'v1',
      AIRFLOW_CONN_PG_MAIN: 'postgres://etl:p%40ss@db:5432/wh',
      AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT:
        '  {"conn_type": "google_cloud_platform", "extra": {"project": "p"}}',
      AIRFLOW_VAR_EMPTY: '',
      AIRFLOW_VAR_UNSET: undefined,
      // Airflow's environment backend: an empty AIRFLOW_CONN_X is "not found" (`if value:`).
      AIRFLOW_CONN_CLEARED: '',
      AIRFLOW_CONN_: 'ignored://',
      AIRFLOW_VAR_: 'ignored',
      airflow_conn_lower: 'not://ours',
      AIRFLOW__CORE__SQL_ALCHEMY_CONN: 'postgresql://not-a-connection',
    });
    expect(got.connections).toEqual([
      {
        id: 'google_cloud_default',
        conn: {
          conn_type: 'google_cloud_platform',
          host: null,
          login: null,
          password: null,
          schema: null,
          port: null,
          extra: { project: 'p' },
        },
      },
      {
        id: 'pg_main',
        conn: {
          conn_type: 'postgres',
          host: 'db',
          login: 'etl',
          password: 'p@ss',
          schema: 'wh',
          port: 5432,
          extra: null,
        },
      },
    ]);
    expect(got.variables).toEqual([
      { key: 'empty', value: '' },
      { key: 'my_key', value: 'v1' },
    ]);
  });

  it('reads back what the agent delivers (connectionEnvName + formatConnectionUri)', () => {
    const conn = {
      conn_type: 'postgres',
      host: 'h',
      login: 'us@er',
      password: 'p@ss:w/rd',
      schema: 'db',
      port: 5432,
      extra: { sslmode: 'require' },
    };
    const env = { [connectionEnvName('warehouse')]: formatConnectionUri(conn) };
    expect(fromAirflowEnv(env).connections).toEqual([{ id: 'warehouse', conn }]);
  });

  it('collects every problem (in code-unit order of the names), naming the variable, never the value', () => {
    expect(
      envIssues({
        AIRFLOW_CONN_BAD_PORT: 'postgres://u:hunter2@h:abc/db',
        AIRFLOW_CONN_EMPTY: '  ',
        AIRFLOW_CONN_BAD_JSON: '{"conn_type": "x", "password": hunter2}',
        AIRFLOW_CONN_DUP: 'x://',
        AIRFLOW_CONN_dup: 'y://',
        'AIRFLOW_CONN_SP ACE': 'x://',
        AIRFLOW_VAR_K: 'a',
        AIRFLOW_VAR_k: 'b',
      }),
    ).toEqual([
      {
        id: 'bad_json',
        line: null,
        envVar: 'AIRFLOW_CONN_BAD_JSON',
        problem: expect.stringMatching(/not valid JSON/),
      },
      {
        id: 'bad_port',
        line: null,
        envVar: 'AIRFLOW_CONN_BAD_PORT',
        problem: 'the port is not an integer',
      },
      {
        id: 'empty',
        line: null,
        envVar: 'AIRFLOW_CONN_EMPTY',
        problem: 'the value is only whitespace',
      },
      {
        id: 'sp ace',
        line: null,
        envVar: 'AIRFLOW_CONN_SP ACE',
        problem: expect.stringMatching(/not valid/),
      },
      {
        id: 'dup',
        line: null,
        envVar: 'AIRFLOW_CONN_dup',
        problem: expect.stringMatching(/same connection as AIRFLOW_CONN_DUP/),
      },
      {
        id: 'k',
        line: null,
        envVar: 'AIRFLOW_VAR_k',
        problem: expect.stringMatching(/same variable as AIRFLOW_VAR_K/),
      },
    ]);
  });
});
