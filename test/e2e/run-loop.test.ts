import { cpSync, existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  api,
  cli,
  REPO,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';

interface RunDetail {
  run: { run_id: string; state: string; dag_version: number };
  task_instances: {
    task_id: string;
    state: string;
    try_number: number;
    error_message: string | null;
  }[];
}

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let env: Record<string, string>;

beforeAll(async () => {
  scratch = scratchDir('leoflow-e2e-');
  const dags = join(scratch.dir, 'dags');
  cpSync(join(REPO, 'examples/dags/etl_python'), join(dags, 'etl_python'), { recursive: true });
  writeDag(
    dags,
    'flaky_chain',
    `dag_id: flaky_chain
tasks:
  - task_id: sometimes
    retries: 1
    retry_delay_seconds: 1
    command: |
      echo "try $AIRFLOW_CTX_TRY_NUMBER"
      [ "$AIRFLOW_CTX_TRY_NUMBER" -ge 3 ] || exit 3
  - task_id: after
    depends_on: [sometimes]
    command: echo after
`,
  );
  writeDag(
    dags,
    'too_slow',
    `dag_id: too_slow
tasks:
  - task_id: sleeper
    execution_timeout_seconds: 2
    env: { BEAT: "${scratch.dir}/grandchild.beat" }
    command: |
      ( while :; do date +%s%N > "$BEAT"; sleep 0.1; done ) &
      echo "grandchild $!"
      sleep 300
`,
  );
  sa = await startStandalone({ dataDir: join(scratch.dir, 'data'), dagsFolder: dags });
  env = { LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token };
});

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

describe('Leoflow Lite run loop (real standalone, CLI and agent processes)', () => {
  it('runs the three-task Python ETL with XCom to success', async () => {
    const res = await cli(
      ['runs', 'trigger', 'etl_python', '--conf', '{"multiplier": 2}', '--wait', '-o', 'json'],
      env,
    );
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const detail = JSON.parse(res.stdout) as RunDetail;
    expect(detail.run.state).toBe('success');
    expect(detail.task_instances.map((t) => `${t.task_id}:${t.state}`)).toEqual([
      'extract:success',
      'transform:success',
      'load:success',
    ]);
    const logs = await cli(['tasks', 'logs', detail.run.run_id, 'load', '-o', 'json'], env);
    const lines = (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines.map(
      (l) => l.message,
    );
    // amounts 10..50 sum to 150; multiplier 2 from the run conf
    expect(lines).toContain('loaded 5 rows, total amount 300');
    const xcom = await api<{ xcom: { key: string; value: string }[] }>(
      sa,
      'GET',
      `/api/v1/dags/etl_python/runs/${detail.run.run_id}/tasks/transform/xcom`,
    );
    expect(JSON.parse(xcom.xcom.find((x) => x.key === 'return_value')!.value)).toEqual({
      total: 300,
      count: 5,
    });
  });

  it('retries, fails with downstream upstream_failed, then clear-and-rerun succeeds', async () => {
    const res = await cli(['runs', 'trigger', 'flaky_chain', '--wait', '-o', 'json'], env);
    expect(res.code).toBe(1);
    const failed = JSON.parse(res.stdout) as RunDetail;
    expect(failed.run.state).toBe('failed');
    expect(failed.task_instances.map((t) => `${t.task_id}:${t.state}#${t.try_number}`)).toEqual([
      'sometimes:failed#2',
      'after:upstream_failed#1',
    ]);
    const cleared = await cli(
      ['tasks', 'clear', failed.run.run_id, 'sometimes', '-o', 'json'],
      env,
    );
    expect(cleared.code).toBe(0);
    expect((JSON.parse(cleared.stdout) as { cleared: string[] }).cleared).toEqual([
      'sometimes',
      'after',
    ]);
    const done = await waitFor('rerun to finish', async () => {
      const d = await api<RunDetail>(
        sa,
        'GET',
        `/api/v1/dags/flaky_chain/runs/${failed.run.run_id}`,
      );
      return d.run.state === 'success' || d.run.state === 'failed' ? d : undefined;
    });
    expect(done.run.state).toBe('success');
    expect(done.task_instances.map((t) => `${t.task_id}:${t.state}#${t.try_number}`)).toEqual([
      'sometimes:success#3',
      'after:success#2',
    ]);
    const hist = await api<{ history: { try_number: number; state: string }[] }>(
      sa,
      'GET',
      `/api/v1/dags/flaky_chain/runs/${failed.run.run_id}/tasks/sometimes`,
    );
    expect(hist.history.map((h) => `${h.state}#${h.try_number}`)).toEqual(['failed#1', 'failed#2']);
  });

  it('an execution timeout kills the whole process group', async () => {
    const res = await cli(['runs', 'trigger', 'too_slow', '--wait', '-o', 'json'], env);
    const detail = JSON.parse(res.stdout) as RunDetail;
    expect(detail.run.state).toBe('failed');
    expect(detail.task_instances[0]?.error_message).toMatch(/timeout/);
    const logs = await cli(['tasks', 'logs', detail.run.run_id, 'sleeper', '-o', 'json'], env);
    const line = (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines.find((l) =>
      l.message.startsWith('grandchild '),
    );
    const pid = Number(line?.message.split(' ')[1]);
    expect(pid).toBeGreaterThan(0);
    // The grandchild beats into a file: it is dead once the beat stops (its pid is the PID
    // namespace's own in the sandbox, so the host's /proc cannot be asked about it).
    const beat = join(scratch.dir, 'grandchild.beat');
    expect(existsSync(beat)).toBe(true);
    await waitFor(
      'grandchild to die',
      async () => {
        const before = readFileSync(beat, 'utf8');
        await new Promise((r) => setTimeout(r, 700));
        return readFileSync(beat, 'utf8') === before ? true : undefined;
      },
      10_000,
    );
  });

  it('keeps the data directory private to the control plane', () => {
    expect(existsSync(join(sa.dataDir, 'admin.token'))).toBe(true);
    expect(statSync(sa.dataDir).mode & 0o777).toBe(0o700);
    expect(statSync(join(sa.dataDir, 'admin.token')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(sa.dataDir, 'admin.token'), 'utf8')).toMatch(/^eyJ/);
  });
});
