/**
 * Issue 10, item 5, end to end: `kill -9` of standalone at each point along dispatch and report,
 * then a restart on the same data directory and agent port. For every point the run must end as
 * the tasks decided (success), no try may be consumed by the crash (each task instance finishes
 * as try 1 with no earlier try in its history), and no attempt may run twice or overlap (each
 * task's command ran exactly once, per its own start/end marks).
 *
 * The crash is the server's own: the test-only hook (packages/server/src/util/test-faults.ts)
 * makes standalone SIGKILL itself the first time it reaches the named point.
 */
import { chmodSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  api,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';

const POINTS = [
  'before_spawn',
  'after_spawn',
  'after_register',
  'after_task_exit',
  'before_report',
  'after_report',
] as const;

const TASKS = ['a', 'b', 'c'];

interface RunDetail {
  run: { run_id: string; state: string };
  task_instances: { task_id: string; state: string; try_number: number }[];
}

interface TaskDetail {
  task_instance: { try_number: number; state: string };
  history: { try_number: number; state: string }[];
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

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function crashAt(point: (typeof POINTS)[number]) {
  const scratch = scratchDir(`leoflow-crash-${point}-`);
  cleanups.push(() => scratch.cleanup());
  const marks = join(scratch.dir, 'marks.log');
  // Every attempt runs under a uid of its own: all of them must be able to append here.
  writeFileSync(marks, '');
  chmodSync(marks, 0o666);
  const dags = join(scratch.dir, 'dags');
  const tasks = TASKS.map(
    (id) => `  - task_id: ${id}
    retries: 2
    retry_delay_seconds: 1
    do_xcom_push: true
    env: { MARKS: "${marks}" }
    command: |
      echo "$AIRFLOW_CTX_TASK_ID $AIRFLOW_CTX_TRY_NUMBER start $(date +%s%3N)" >> "$MARKS"
      sleep 0.5
      echo "$AIRFLOW_CTX_TASK_ID $AIRFLOW_CTX_TRY_NUMBER end $(date +%s%3N)" >> "$MARKS"
      echo "done-$AIRFLOW_CTX_TASK_ID"
`,
  ).join('');
  writeDag(dags, 'crashy', `dag_id: crashy\ntasks:\n${tasks}`);
  const dataDir = join(scratch.dir, 'data');
  const agentPort = await freePort();
  const env = { LEOFLOW_TEST_FAULT: point, LEOFLOW_TEST_FAULT_ARM: 'sigkill-this-process' };

  let sa: Standalone = await startStandalone({ dataDir, dagsFolder: dags, agentPort, env });
  cleanups.push(() => sa.stop());
  expect(sa.output()).toMatch(/TEST FAULT INJECTION ARMED/);
  const { run_id } = await api<{ run_id: string }>(sa, 'POST', '/api/v1/dags/crashy/runs', {
    run_id: `crash_${point}`,
  });

  // The server kills itself at the point.
  const crashed = sa;
  await waitFor(
    `standalone to die at ${point}`,
    async () =>
      crashed.proc.signalCode !== null || crashed.proc.exitCode !== null ? true : undefined,
    30_000,
  );
  expect(crashed.proc.signalCode).toBe('SIGKILL');
  expect(crashed.output()).toContain(`test fault "${point}": SIGKILL`);

  sa = await startStandalone({ dataDir, dagsFolder: dags, agentPort });
  const detail = await waitFor(
    `run ${run_id} to finish after the restart`,
    async () => {
      const d = await api<RunDetail>(sa, 'GET', `/api/v1/dags/crashy/runs/${run_id}`);
      return d.run.state === 'success' || d.run.state === 'failed' ? d : undefined;
    },
    60_000,
  );
  const agentsDir = join(dataDir, 'agents');
  const agentLogs = readdirSync(agentsDir)
    .filter((f) => f.endsWith('.log'))
    .map((f) => readFileSync(join(agentsDir, f), 'utf8'))
    .join('\n');
  const histories = await Promise.all(
    TASKS.map((t) => api<TaskDetail>(sa, 'GET', `/api/v1/dags/crashy/runs/${run_id}/tasks/${t}`)),
  );
  return { detail, histories, marks: readFileSync(marks, 'utf8'), agentLogs, server: sa };
}

describe('kill -9 of standalone at each point along dispatch and report', () => {
  for (const point of POINTS) {
    it(`${point}: the run succeeds, every task is still try 1, and each ran exactly once`, async () => {
      const { detail, histories, marks, agentLogs } = await crashAt(point);
      // Every task succeeded as try 1 (listed here are those that did not).
      const off = detail.task_instances
        .map((t) => `${t.task_id}:${t.state}#${t.try_number}`)
        .filter((t) => !t.endsWith(':success#1'));
      expect(off).toEqual([]);
      expect(detail.task_instances).toHaveLength(TASKS.length);
      expect(detail.run.state).toBe('success');
      // No try consumed by the crash: no earlier try on record for any task.
      expect(histories.map((h) => h.history)).toEqual(TASKS.map(() => []));

      // No attempt ran twice, so none overlapped: one start and one end per task, in order.
      const lines = marks
        .trim()
        .split('\n')
        .map((l) => l.split(' '));
      for (const t of TASKS) {
        const own = lines.filter((l) => l[0] === t);
        expect(
          own.map((l) => `${l[1]} ${l[2]}`),
          `marks of ${t}`,
        ).toEqual(['1 start', '1 end']);
        expect(Number(own[1]![3])).toBeGreaterThanOrEqual(Number(own[0]![3]));
      }

      // Every agent got its outcome through: none gave up on a report or on its log.
      expect(agentLogs).not.toMatch(/could not deliver ReportState/);
      expect(agentLogs).not.toMatch(/gave up shipping/);
    }, 120_000);
  }
});
