import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  api,
  cli,
  REPO,
  scratchDir,
  startStandalone,
  type Standalone,
} from '../support/processes.js';

/**
 * Issue 41's example DAGs (examples/dags/{trigger_rules,setup_teardown,branching,task_groups,
 * dynamic_mapping,retry_backoff}) run end to end: a real standalone, its agents, the CLI.
 */

interface TI {
  task_id: string;
  map_index: number;
  state: string;
  try_number: number;
  map_value: Record<string, string> | null;
  decision: { followed: string[]; skipped: string[] } | null;
}
interface RunDetail {
  run: { run_id: string; state: string };
  task_instances: TI[];
}

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let env: Record<string, string>;

const EXAMPLES = [
  'trigger_rules',
  'setup_teardown',
  'branching',
  'task_groups',
  'dynamic_mapping',
  'retry_backoff',
];

beforeAll(async () => {
  scratch = scratchDir('leoflow-shapes-');
  const dags = join(scratch.dir, 'dags');
  for (const d of EXAMPLES)
    cpSync(join(REPO, 'examples/dags', d), join(dags, d), { recursive: true });
  sa = await startStandalone({
    dataDir: join(scratch.dir, 'data'),
    dagsFolder: dags,
    extraArgs: ['--vault-seed', join(REPO, 'examples/vault'), '--secret-scoping', 'enforce'],
  });
  env = { LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token };
});

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

async function runDag(dagId: string, conf?: object): Promise<RunDetail> {
  const res = await cli(
    [
      'runs',
      'trigger',
      dagId,
      ...(conf ? ['--conf', JSON.stringify(conf)] : []),
      '--wait',
      '-o',
      'json',
    ],
    env,
  );
  expect(res.stderr).toBe('');
  return JSON.parse(res.stdout) as RunDetail;
}

const states = (d: RunDetail): Record<string, string> =>
  Object.fromEntries(
    d.task_instances.map((t) => [
      t.map_index >= 0 ? `${t.task_id}[${t.map_index}]` : t.task_id,
      t.state,
    ]),
  );

async function logOf(runId: string, taskId: string, extra: string[] = []): Promise<string[]> {
  const res = await cli(['tasks', 'logs', runId, taskId, ...extra, '-o', 'json'], env);
  expect(res.stderr).toBe('');
  return (JSON.parse(res.stdout) as { lines: { message: string }[] }).lines.map((l) => l.message);
}

describe('issue 41 examples on a real standalone', () => {
  it('trigger_rules: a failure absorbed by all_done / one_failed / always, a skip propagated or tolerated', async () => {
    const d = await runDag('trigger_rules');
    expect(states(d)).toEqual({
      ok: 'success',
      broken: 'failed',
      cleanup: 'success',
      alert: 'success',
      needs_all: 'upstream_failed',
      always_runs: 'success',
      gate: 'success',
      gated: 'skipped',
      after_skip: 'success',
      no_skips_allowed: 'skipped',
    });
    // no leaf failed: the run succeeds although broken failed
    expect(d.run.state).toBe('success');
  });

  it('setup_teardown: the teardown runs after the work fails; the run fails by the work; each gets what it declares', async () => {
    const ok = await runDag('setup_teardown');
    expect(ok.run.state).toBe('success');
    const failed = await runDag('setup_teardown', { fail: true });
    expect(states(failed)).toEqual({
      create_workspace: 'success',
      work: 'failed',
      report: 'upstream_failed',
      delete_workspace: 'success',
    });
    expect(failed.run.state).toBe('failed');
    expect(await logOf(failed.run.run_id, 'delete_workspace')).toContain(
      `deleting ws-${failed.run.run_id}`,
    );
    const delivered = async (task: string) => {
      const res = await cli(['tasks', 'delivery', failed.run.run_id, task, '-o', 'json'], env);
      return (JSON.parse(res.stdout) as { attempts: { variables_delivered: string[] | null }[] })
        .attempts[0]?.variables_delivered;
    };
    expect(await delivered('create_workspace')).toEqual(['report_recipient']);
    expect(await delivered('delete_workspace')).toEqual([]);
    // clearing the work clears its setup and teardown with it
    const cleared = await cli(
      ['tasks', 'clear', failed.run.run_id, 'work', '--no-downstream', '-o', 'json'],
      env,
    );
    expect((JSON.parse(cleared.stdout) as { cleared: string[] }).cleared).toEqual([
      'create_workspace',
      'work',
      'delete_workspace',
    ]);
  });

  it('branching: return-value branch, exit-code branch and short-circuit, with the join and the skips', async () => {
    const d = await runDag('branching');
    expect(states(d)).toEqual({
      choose_load: 'success',
      full_load: 'skipped',
      incremental_load: 'success',
      load_done: 'success',
      check_freshness: 'success',
      fresh: 'skipped',
      stale_warning: 'success',
      anything_new: 'success',
      publish: 'success',
      announce: 'success',
    });
    expect(d.task_instances.find((t) => t.task_id === 'choose_load')?.decision).toEqual({
      followed: ['incremental_load'],
      skipped: ['full_load'],
    });
    const full = await runDag('branching', { mode: 'full', new_rows: 0 });
    const s = states(full);
    expect([s.full_load, s.incremental_load, s.load_done]).toEqual([
      'success',
      'skipped',
      'success',
    ]);
    // nothing new: everything after the short-circuit is skipped
    expect([s.anything_new, s.publish, s.announce]).toEqual(['success', 'skipped', 'skipped']);
    expect(full.run.state).toBe('success');
  });

  it('task_groups: prefixed ids and group dependencies, in order', async () => {
    const d = await runDag('task_groups');
    expect(d.run.state).toBe('success');
    expect(d.task_instances.map((t) => t.task_id)).toEqual([
      'start',
      'extract.orders',
      'extract.customers',
      'transform.join',
      'transform.checks.row_count',
      'transform.checks.nulls',
      'load',
    ]);
    const dag = await api<{ spec: { task_groups: { group_id: string }[] } }>(
      sa,
      'GET',
      '/api/v1/dags/task_groups',
    );
    expect(dag.spec.task_groups.map((g) => g.group_id)).toEqual([
      'extract',
      'transform',
      'transform.checks',
    ]);
  });

  it('dynamic_mapping: one instance per element, each with its own log, XCom and delivery; the reduce sees them all', async () => {
    const d = await runDag('dynamic_mapping');
    expect(d.run.state).toBe('success');
    expect(states(d)).toEqual({
      list_files: 'success',
      'process[0]': 'success',
      'process[1]': 'success',
      'process[2]': 'success',
      summarize: 'success',
      'regions[0]': 'success',
      'regions[1]': 'success',
      'regions[2]': 'success',
      'regions[3]': 'success',
    });
    const runId = d.run.run_id;
    const mapped = await cli(['tasks', 'mapped', runId, 'process', '-o', 'json'], env);
    expect(
      (JSON.parse(mapped.stdout) as { task_instances: TI[] }).task_instances.map((t) => [
        t.map_index,
        t.map_value?.FILE,
      ]),
    ).toEqual([
      [0, 'orders.csv'],
      [1, 'customers.csv'],
      [2, 'items.csv'],
    ]);
    // the index got its declared Variable; the agent masks a delivered value in the log (issue 34)
    const indexLog = await logOf(runId, 'process', ['--map-index', '1']);
    expect(indexLog).toContain('index 1 processing customers.csv (full) for ***');
    expect(indexLog).not.toContain('data-team@example.com');
    // without a map index the CLI says the task is mapped and how to name one
    const ambiguous = await cli(['tasks', 'logs', runId, 'process'], env);
    expect(ambiguous.code).not.toBe(0);
    expect(ambiguous.stderr).toContain('--map-index');
    expect(await logOf(runId, 'summarize')).toContain('3 files, 60 rows');
    const xcom = await api<{ xcom: { key: string; value: string }[] }>(
      sa,
      'GET',
      `/api/v1/dags/dynamic_mapping/runs/${runId}/tasks/process/xcom?map_index=2`,
    );
    expect(JSON.parse(xcom.xcom[0]!.value)).toEqual({ file: 'items.csv', rows: 30 });
    for (const i of [0, 1, 2]) {
      const res = await cli(
        ['tasks', 'delivery', runId, 'process', '--map-index', String(i), '-o', 'json'],
        env,
      );
      const rec = (JSON.parse(res.stdout) as { attempts: Record<string, unknown>[] }).attempts;
      expect(rec).toHaveLength(1);
      expect(rec[0]!.variables_delivered).toEqual(['report_recipient']);
    }
    expect(
      d.task_instances
        .filter((t) => t.task_id === 'regions')
        .map((t) => `${t.map_value?.REGION}/${t.map_value?.TIER}`),
    ).toEqual(['eu/gold', 'eu/silver', 'us/gold', 'us/silver']);
  });

  it('retry_backoff: the retries wait about twice as long each time, capped', async () => {
    const d = await runDag('retry_backoff');
    expect(d.run.state).toBe('success');
    const flaky = d.task_instances[0]!;
    expect(flaky.try_number).toBe(3);
    const hist = await api<{
      history: { try_number: number; started_at: string; ended_at: string }[];
      task_instance: { started_at: string };
    }>(sa, 'GET', `/api/v1/dags/retry_backoff/runs/${d.run.run_id}/tasks/flaky`);
    const starts = [...hist.history.map((h) => h.started_at), hist.task_instance.started_at].map(
      (s) => Date.parse(s),
    );
    const ends = hist.history.map((h) => Date.parse(h.ended_at));
    // try 1 failed → at least 1 s (delay 1 × 2^0, jitter within [1, 2)); try 2 → at least 2 s
    expect(starts[1]! - ends[0]!).toBeGreaterThanOrEqual(1000);
    expect(starts[2]! - ends[1]!).toBeGreaterThanOrEqual(2000);
  });
});
