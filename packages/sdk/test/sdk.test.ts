import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  getConnection,
  getVariable,
  pullXcom,
  pushXcom,
  taskContext,
  xcomEnvName,
} from '../src/index.js';

describe('getConnection reads AIRFLOW_CONN_<ID> with the server codec', () => {
  it('URI form', () => {
    const c = getConnection('warehouse_db', {
      env: {
        AIRFLOW_CONN_WAREHOUSE_DB:
          'postgres://report:p%40ss@db.example:5432/analytics?sslmode=require',
      },
    });
    expect(c).toEqual({
      conn_id: 'warehouse_db',
      conn_type: 'postgres',
      host: 'db.example',
      login: 'report',
      password: 'p@ss',
      schema: 'analytics',
      port: 5432,
      extra: { sslmode: 'require' },
    });
  });
  it('JSON form', () => {
    const c = getConnection('warehouse_db', {
      env: {
        AIRFLOW_CONN_WAREHOUSE_DB: ' {"conn_type": "postgres", "host": "h", "extra": {"a": 1}}',
      },
    });
    expect([c.conn_type, c.host, c.extra]).toEqual(['postgres', 'h', { a: 1 }]);
  });
  it('the env name is the id upper-cased and nothing else changed (as Airflow looks it up)', () => {
    const c = getConnection('my-conn.x', { env: { 'AIRFLOW_CONN_MY-CONN.X': 'http://h' } });
    expect(c.host).toBe('h');
  });
  it('missing: says it was probably not declared and shows the line to add', () => {
    expect(() => getConnection('warehouse_db', { env: {} })).toThrow(
      /AIRFLOW_CONN_WAREHOUSE_DB is not set.*did not declare it in leoflow.yaml.*`connections: \[warehouse_db\]` under the task/,
    );
  });
  it('keeps None and "" apart as Airflow\'s Connection does (URI and JSON form)', () => {
    // No path → schema "", empty user before ":" → login "", no "@" → login/password None.
    expect(getConnection('c', { env: { AIRFLOW_CONN_C: 'http://:pw@Host.Example:80' } })).toEqual({
      conn_id: 'c',
      conn_type: 'http',
      host: 'host.example',
      login: '',
      password: 'pw',
      schema: '',
      port: 80,
      extra: null,
    });
    expect(getConnection('c', { env: { AIRFLOW_CONN_C: 'http://h' } })).toMatchObject({
      login: null,
      password: null,
      schema: '',
    });
    expect(getConnection('c', { env: { AIRFLOW_CONN_C: 'http://u@/db' } })).toMatchObject({
      host: '',
      login: 'u',
      password: null,
      schema: 'db',
    });
    expect(
      getConnection('c', {
        env: { AIRFLOW_CONN_C: '{"conn_type": "http", "host": "", "login": null}' },
      }),
    ).toMatchObject({ host: '', login: null, schema: null });
  });
  it('an empty AIRFLOW_CONN_X is "not found", as in Airflow\'s environment backend', () => {
    expect(() => getConnection('c', { env: { AIRFLOW_CONN_C: '' } })).toThrow(
      expect.objectContaining({ code: 'LF_SDK_CONNECTION_MISSING' }),
    );
  });
  it('JSON without conn_type is accepted with the type unset, and warns (never the value)', () => {
    const warnings: string[] = [];
    const c = getConnection('c', {
      env: { AIRFLOW_CONN_C: '{"host": "h", "password": "s3cret"}' },
      warn: (m) => warnings.push(m),
    });
    expect(c).toEqual({
      conn_id: 'c',
      conn_type: null,
      host: 'h',
      login: null,
      password: 's3cret',
      schema: null,
      port: null,
      extra: null,
    });
    expect(warnings).toEqual([expect.stringMatching(/no conn_type/)]);
    expect(warnings[0]).not.toContain('s3cret');
  });
  it('a malformed value raises the codec error without echoing the value', () => {
    let err: unknown;
    try {
      getConnection('c', { env: { AIRFLOW_CONN_C: 'postgres://u:s3cret#x@h' } });
    } catch (e) {
      err = e;
    }
    expect((err as { code: string }).code).toBe('LF_CONN_URI_INVALID');
    expect(String((err as Error).message)).not.toContain('s3cret');
  });
});

describe('getVariable reads AIRFLOW_VAR_<KEY>', () => {
  it('raw string by default, JSON with { json: true }', () => {
    const env = {
      AIRFLOW_VAR_REPORT_RECIPIENT: 'ops@example.com',
      AIRFLOW_VAR_LIMITS: '{"max": 3}',
    };
    expect(getVariable('report_recipient', { env })).toBe('ops@example.com');
    expect(getVariable('limits', { env, json: true })).toEqual({ max: 3 });
  });
  it('missing: shows the variables line to add; a default avoids the error', () => {
    expect(() => getVariable('report_recipient', { env: {} })).toThrow(
      /`variables: \[report_recipient\]`/,
    );
    expect(getVariable('report_recipient', { env: {}, default: 'x' })).toBe('x');
  });
  it('not JSON with { json: true }: an error that does not echo the value', () => {
    expect(() => getVariable('k', { env: { AIRFLOW_VAR_K: 'hunter2' }, json: true })).toThrow(
      /not valid JSON/,
    );
    expect(() => getVariable('k', { env: { AIRFLOW_VAR_K: 'hunter2' }, json: true })).not.toThrow(
      /hunter2/,
    );
  });
});

describe('taskContext exposes what the agent injects', () => {
  it('reads every documented name', () => {
    const ctx = taskContext({
      env: {
        AIRFLOW_CTX_DAG_ID: 'etl',
        AIRFLOW_CTX_DAG_RUN_ID: 'run-1',
        AIRFLOW_CTX_TASK_ID: 'extract',
        AIRFLOW_CTX_TRY_NUMBER: '2',
        AIRFLOW_CTX_LOGICAL_DATE: '2026-01-01T00:00:00Z',
        LEOFLOW_RUN_ID: 'run-1',
        LEOFLOW_RUN_CONF: '{"multiplier": 5}',
        LEOFLOW_PARAMS: '{"p": "v"}',
        LEOFLOW_DATA_INTERVAL_START: '2026-01-01T00:00:00Z',
        LEOFLOW_DATA_INTERVAL_END: '2026-01-02T00:00:00Z',
        LEOFLOW_XCOM_DIR: '/w/xcom',
        LEOFLOW_TASK_INSTANCE_ID: 'ti-1',
        LEOFLOW_MAP_INDEX: '4',
        LEOFLOW_RUN_TYPE: 'scheduled',
        LEOFLOW_DS: '2026-01-01',
        LEOFLOW_DS_NODASH: '20260101',
        LEOFLOW_TS: '2026-01-01T00:00:00+00:00',
        LEOFLOW_TS_NODASH: '20260101T000000',
        LEOFLOW_TS_NODASH_WITH_TZ: '20260101T000000+0000',
        LEOFLOW_PREV_DATA_INTERVAL_START_SUCCESS: '2025-12-31T00:00:00Z',
        LEOFLOW_PREV_DATA_INTERVAL_END_SUCCESS: '2026-01-01T00:00:00Z',
      },
    });
    expect(ctx).toEqual({
      dagId: 'etl',
      runId: 'run-1',
      taskId: 'extract',
      tryNumber: 2,
      mapIndex: 4,
      runType: 'scheduled',
      logicalDate: '2026-01-01T00:00:00Z',
      ds: '2026-01-01',
      dsNodash: '20260101',
      ts: '2026-01-01T00:00:00+00:00',
      tsNodash: '20260101T000000',
      tsNodashWithTz: '20260101T000000+0000',
      dataIntervalStart: '2026-01-01T00:00:00Z',
      dataIntervalEnd: '2026-01-02T00:00:00Z',
      prevDataIntervalStartSuccess: '2025-12-31T00:00:00Z',
      prevDataIntervalEndSuccess: '2026-01-01T00:00:00Z',
      conf: { multiplier: 5 },
      params: { p: 'v' },
      xcomDir: '/w/xcom',
      taskInstanceId: 'ti-1',
    });
  });
  it('outside a run: nulls and empty objects', () => {
    const ctx = taskContext({ env: {} });
    expect([ctx.dagId, ctx.tryNumber, ctx.logicalDate, ctx.conf, ctx.params]).toEqual([
      null,
      null,
      null,
      {},
      {},
    ]);
  });
});

describe('XCom helpers follow the run loop convention', () => {
  it('xcomEnvName matches the agent: upper-cased, non A-Z0-9 to _', () => {
    expect(xcomEnvName('load-v2.x')).toBe('LEOFLOW_XCOM_LOAD_V2_X');
  });
  it('pullXcom reads LEOFLOW_XCOM_<UPSTREAM> first', () => {
    expect(pullXcom('extract', { env: { LEOFLOW_XCOM_EXTRACT: '{"rows": 3}' } })).toEqual({
      rows: 3,
    });
    expect(pullXcom('extract', { env: { LEOFLOW_XCOM_EXTRACT: 'plain' }, json: false })).toBe(
      'plain',
    );
  });
  it('pullXcom falls back to the file in LEOFLOW_XCOM_DIR', () => {
    const dir = mkdtempSync(join(tmpdir(), 'xcom-'));
    writeFileSync(join(dir, 'big-one'), '[1,2,3]');
    expect(pullXcom('big-one', { env: { LEOFLOW_XCOM_DIR: dir } })).toEqual([1, 2, 3]);
  });
  it('pullXcom with nothing: says to add depends_on and do_xcom_push', () => {
    expect(() => pullXcom('extract', { env: {} })).toThrow(
      /depends_on: \[extract\].*do_xcom_push: true/,
    );
  });
  it('pushXcom writes the value as JSON on the final stdout line', () => {
    let out = 'log line without newline';
    pushXcom({ a: 'multi\nline' }, { write: (t) => (out += t) });
    const lines = out.split('\n').filter((l) => l !== '');
    expect(JSON.parse(lines[lines.length - 1]!)).toEqual({ a: 'multi\nline' });
    expect(lines[0]).toBe('log line without newline');
    expect(() => pushXcom(undefined, { write: () => {} })).toThrow(/cannot be written as JSON/);
  });
});
