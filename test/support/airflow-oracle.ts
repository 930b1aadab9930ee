import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { REPO } from './processes.js';

/**
 * Apache Airflow itself, as a long-lived Python process answering JSON lines
 * (test/oracle/airflow_oracle.py), in the project's `oracle` environment
 * (python/requirements/oracle.txt: apache-airflow-core 3.3.2, apache-airflow-task-sdk 1.3.2).
 */

/** `oracle`: Airflow core + task SDK; `oracle-google`: the same with the Google provider. */
export type OracleEnv = 'oracle' | 'oracle-google';

export const AIRFLOW_ORACLE_HOWTO =
  'run scripts/python-env.sh oracle (it installs apache-airflow-core and apache-airflow-task-sdk ' +
  'from python/requirements/oracle.txt into a cached venv; needs PyPI once)';

export const GOOGLE_ORACLE_HOWTO =
  'run scripts/python-env.sh oracle-google (Airflow with apache-airflow-providers-google from ' +
  'python/requirements/oracle-google.txt, into a cached venv; needs PyPI once)';

/** The oracle venv when it is complete, else null (never creates it: that needs PyPI). */
export function airflowOracleVenv(name: OracleEnv = 'oracle'): string | null {
  try {
    const out = execFileSync(join(REPO, 'scripts/python-env.sh'), ['--check', name], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return out === '' ? null : out;
  } catch {
    return null;
  }
}

/**
 * Whether the Airflow differential tests run here. Without the oracle environment a plain
 * `npm test` skips them with a note; under CI (CI=true) or with LEOFLOW_TEST_REQUIRE_AIRFLOW=1 a
 * missing environment is a failure that says how to make it.
 */
export function airflowOracleAvailability(name: OracleEnv = 'oracle'): 'run' | 'skip' | 'missing' {
  if (airflowOracleVenv(name) !== null) return 'run';
  const required = process.env.CI === 'true' || process.env.LEOFLOW_TEST_REQUIRE_AIRFLOW === '1';
  return required ? 'missing' : 'skip';
}

export type OracleAnswer = Record<string, unknown>;

export interface AirflowOracle {
  /** One request; answers come back in order, so many may be in flight. */
  ask(request: Record<string, unknown>): Promise<OracleAnswer>;
  /** Many requests, pipelined; answers in the same order. */
  askAll(requests: Record<string, unknown>[]): Promise<OracleAnswer[]>;
  close(): Promise<void>;
  /** what the process wrote to stderr (Airflow's own logging), for failure messages */
  stderr(): string;
}

export async function startAirflowOracle(
  opts: { env?: OracleEnv; script?: string } = {},
): Promise<AirflowOracle> {
  const name = opts.env ?? 'oracle';
  const venv = airflowOracleVenv(name);
  if (venv === null) {
    throw new Error(
      `no ${name} environment: ${name === 'oracle' ? AIRFLOW_ORACLE_HOWTO : GOOGLE_ORACLE_HOWTO}`,
    );
  }
  const proc: ChildProcessWithoutNullStreams = spawn(
    join(venv, 'bin/python'),
    [join(REPO, opts.script ?? 'test/oracle/airflow_oracle.py')],
    {
      // No inherited AIRFLOW_* setting may change what Airflow answers; nothing needs network.
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        LANG: 'C.UTF-8',
        PYTHONIOENCODING: 'utf-8',
        PYTHONDONTWRITEBYTECODE: '1',
        NO_PROXY: '*',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let err = '';
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (d: string) => {
    err = (err + d).slice(-20_000);
  });
  const pending = new Map<
    number,
    { resolve: (a: OracleAnswer) => void; reject: (e: Error) => void }
  >();
  let seq = 0;
  let exited: Error | null = null;
  const lines = createInterface({ input: proc.stdout });
  lines.on('line', (line) => {
    const answer = JSON.parse(line) as OracleAnswer;
    const n = answer.seq as number;
    const p = pending.get(n);
    if (p === undefined) return;
    pending.delete(n);
    delete answer.seq;
    if ('oracle_error' in answer) {
      p.reject(new Error(`the oracle script failed: ${String(answer.oracle_error)}`));
    } else {
      p.resolve(answer);
    }
  });
  proc.on('exit', (code, signal) => {
    exited = new Error(`the Airflow oracle exited (${code ?? signal}); stderr:\n${err}`);
    for (const p of pending.values()) p.reject(exited);
    pending.clear();
  });
  proc.stdin.on('error', () => undefined);

  const ask = (request: Record<string, unknown>): Promise<OracleAnswer> => {
    if (exited !== null) return Promise.reject(exited);
    const n = ++seq;
    return new Promise<OracleAnswer>((resolve, reject) => {
      pending.set(n, { resolve, reject });
      proc.stdin.write(JSON.stringify({ ...request, seq: n }) + '\n');
    });
  };
  const oracle: AirflowOracle = {
    ask,
    async askAll(requests) {
      // Bounded batches keep the pipe from holding megabytes at once.
      const out: OracleAnswer[] = [];
      for (let i = 0; i < requests.length; i += 200) {
        out.push(...(await Promise.all(requests.slice(i, i + 200).map(ask))));
      }
      return out;
    },
    async close() {
      if (exited !== null) return;
      const done = new Promise<void>((r) => proc.once('exit', () => r()));
      proc.stdin.end();
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await done;
      clearTimeout(timer);
    },
    stderr: () => err,
  };
  const hello = await ask({ op: 'hello' });
  if (hello.airflow !== '3.3.2' || hello.task_sdk !== '1.3.2') {
    await oracle.close();
    throw new Error(`the oracle runs Airflow ${String(hello.airflow)}, not the pinned 3.3.2`);
  }
  return oracle;
}
