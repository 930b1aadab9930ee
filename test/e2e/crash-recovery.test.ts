import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  api,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';

interface RunDetail {
  run: { run_id: string; state: string };
  task_instances: { task_id: string; state: string; try_number: number }[];
}

function freePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone | undefined;

beforeAll(() => {
  scratch = scratchDir('leoflow-crash-');
});
afterAll(async () => {
  await sa?.stop();
  scratch.cleanup();
});

describe('kill -9 of standalone in the middle of runs', () => {
  it('recovers after a restart: every run finishes and no attempt runs twice at once', async () => {
    const marks = join(scratch.dir, 'marks.log');
    // Every attempt runs under a uid of its own: the shared log must be writable by all of them.
    writeFileSync(marks, '');
    chmodSync(marks, 0o666);
    const dags = join(scratch.dir, 'dags');
    const body = (id: string) => `  - task_id: ${id}
    retries: 2
    retry_delay_seconds: 1
    env: { MARKS: "${marks}" }
    command: |
      echo "$AIRFLOW_CTX_DAG_RUN_ID $AIRFLOW_CTX_TASK_ID $AIRFLOW_CTX_TRY_NUMBER start $(date +%s%3N)" >> "$MARKS"
      sleep 3
      echo "$AIRFLOW_CTX_DAG_RUN_ID $AIRFLOW_CTX_TASK_ID $AIRFLOW_CTX_TRY_NUMBER end $(date +%s%3N)" >> "$MARKS"
`;
    writeDag(
      dags,
      'crashy',
      `dag_id: crashy\ntasks:\n${body('a')}${body('b')}${body('c')}  - task_id: d\n    depends_on: [a, b, c]\n    command: echo joined\n`,
    );
    const dataDir = join(scratch.dir, 'data');
    const agentPort = await freePort();
    sa = await startStandalone({ dataDir, dagsFolder: dags, agentPort });
    const runs = await Promise.all(
      [1, 2].map((i) =>
        api<{ run_id: string }>(sa!, 'POST', '/api/v1/dags/crashy/runs', { run_id: `crash_${i}` }),
      ),
    );
    await waitFor('attempts to be running', async () => {
      const d = await api<RunDetail>(sa!, 'GET', `/api/v1/dags/crashy/runs/${runs[0]!.run_id}`);
      return d.task_instances.filter((t) => t.state === 'running').length >= 2 ? true : undefined;
    });

    await sa.kill9();
    await new Promise((r) => setTimeout(r, 1_000));
    sa = await startStandalone({ dataDir, dagsFolder: dags, agentPort });

    for (const r of runs) {
      const done = await waitFor(
        `run ${r.run_id} to finish`,
        async () => {
          const d = await api<RunDetail>(sa!, 'GET', `/api/v1/dags/crashy/runs/${r.run_id}`);
          return d.run.state === 'success' || d.run.state === 'failed' ? d : undefined;
        },
        90_000,
      );
      expect(done.run.state).toBe('success');
    }

    // No two attempts of the same task instance ever overlapped in time.
    const intervals = new Map<string, { try: number; start: number; end: number }[]>();
    const open = new Map<string, number>();
    for (const line of readFileSync(marks, 'utf8').trim().split('\n')) {
      const [run, task, tryN, what, at] = line.split(' ');
      const key = `${run} ${task} ${tryN}`;
      if (what === 'start') open.set(key, Number(at));
      else {
        const list = intervals.get(`${run} ${task}`) ?? [];
        list.push({ try: Number(tryN), start: open.get(key) ?? 0, end: Number(at) });
        intervals.set(`${run} ${task}`, list);
      }
    }
    expect(intervals.size).toBe(6);
    for (const list of intervals.values()) {
      list.sort((x, y) => x.start - y.start);
      for (let i = 1; i < list.length; i++)
        expect(list[i]!.start).toBeGreaterThanOrEqual(list[i - 1]!.end);
    }
  });
});
