import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { getConnection, getVariable, pullXcom, pushXcom, taskContext } from '@leoflow/sdk';
import { isLeoflowError } from '@leoflow/core';
import { REPO } from '../support/processes.js';

/**
 * Issue 40 item 1: the Python task SDK follows the JavaScript SDK's contract exactly. Both read
 * the same environments (contract-cases.json); the answers — values, error codes and error
 * sentences — must be equal. The Python side runs on Debian's /usr/bin/python3 with nothing
 * installed, the package only on PYTHONPATH, as the agent gives it to python tasks.
 */
const PYTHON = '/usr/bin/python3';
type Case = { name: string; op: string; env?: Record<string, string> } & Record<string, unknown>;
const work = mkdtempSync(join(tmpdir(), 'leoflow-sdk-contract-'));
const xcomDir = join(work, 'xcom');
mkdirSync(xcomDir);
writeFileSync(join(xcomDir, 'big.one'), '{"rows": [1, 2, 3]}');
writeFileSync(join(xcomDir, 'text'), 'plain text, not JSON');
const raw = readFileSync(join(REPO, 'test/sdk/contract-cases.json'), 'utf8').replaceAll(
  '$XCOM_DIR',
  xcomDir,
);
const cases = (JSON.parse(raw) as { cases: Case[] }).cases;
afterAll(() => rmSync(work, { recursive: true, force: true }));

function js(c: Case): unknown {
  const env = c.env ?? {};
  switch (c.op) {
    case 'context': {
      const t = taskContext({ env });
      return {
        dag_id: t.dagId,
        run_id: t.runId,
        task_id: t.taskId,
        try_number: t.tryNumber,
        map_index: t.mapIndex,
        run_type: t.runType,
        logical_date: t.logicalDate,
        ds: t.ds,
        ds_nodash: t.dsNodash,
        ts: t.ts,
        ts_nodash: t.tsNodash,
        ts_nodash_with_tz: t.tsNodashWithTz,
        data_interval_start: t.dataIntervalStart,
        data_interval_end: t.dataIntervalEnd,
        prev_data_interval_start_success: t.prevDataIntervalStartSuccess,
        prev_data_interval_end_success: t.prevDataIntervalEndSuccess,
        conf: t.conf,
        params: t.params,
        xcom_dir: t.xcomDir,
        task_instance_id: t.taskInstanceId,
        dag_run_conf: t.conf,
      };
    }
    case 'variable':
      return getVariable(c.key as string, { env });
    case 'variable_json':
      return getVariable(c.key as string, { env, json: true });
    case 'connection': {
      const conn = getConnection(c.id as string, { env, warn: () => undefined });
      return {
        conn_id: conn.conn_id,
        conn_type: conn.conn_type,
        host: conn.host,
        login: conn.login,
        password: conn.password,
        schema: conn.schema,
        port: conn.port,
        extra: conn.extra,
      };
    }
    case 'xcom':
      return pullXcom(c.id as string, { env });
    case 'xcom_raw':
      return pullXcom(c.id as string, { env, json: false });
    case 'push': {
      const out: string[] = [];
      pushXcom(c.value, { write: (t) => void out.push(t) });
      return out;
    }
    default:
      throw new Error(c.op);
  }
}

/** The one difference in wording: each SDK names its own option for "read as text". */
const OPTION_NAMES: [string, string][] = [
  ['{ json: true }', 'deserialize_json=True'],
  ['{ json: false }', 'json_value=False'],
];

function jsAnswer(c: Case): unknown {
  try {
    return { ok: js(c) };
  } catch (e) {
    if (!isLeoflowError(e)) throw e;
    let message = e.message;
    for (const [jsName, pyName] of OPTION_NAMES) message = message.replace(jsName, pyName);
    return { error: { code: e.code, message } };
  }
}

function pythonAnswers(): unknown[] {
  const out = execFileSync(PYTHON, [join(REPO, 'test/sdk/contract_runner.py')], {
    input: raw,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      PYTHONPATH: join(REPO, 'python/leoflow/src'),
    },
  });
  return JSON.parse(out) as unknown[];
}

describe('the Python and JavaScript task SDKs read the same environment the same way', () => {
  const py = pythonAnswers();
  it('answers every case', () => expect(py).toHaveLength(cases.length));
  it.each(cases.map((c, i) => [c.name, i] as const))('%s', (_name, i) => {
    expect(py[i]).toEqual(jsAnswer(cases[i]!));
  });
  it('the cases cover errors as well as values', () => {
    const codes = new Set(
      py.flatMap((a) =>
        'error' in (a as object) ? [(a as { error: { code: string } }).error.code] : [],
      ),
    );
    expect([...codes].sort()).toEqual([
      'LF_CONN_URI_INVALID',
      'LF_SDK_CONNECTION_MISSING',
      'LF_SDK_CONTEXT_INVALID',
      'LF_SDK_VARIABLE_MISSING',
      'LF_SDK_VARIABLE_NOT_JSON',
      'LF_SDK_XCOM_MISSING',
      'LF_SDK_XCOM_NOT_JSON',
    ]);
  });
});
