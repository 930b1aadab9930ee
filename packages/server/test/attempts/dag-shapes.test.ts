import { createHash } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { ReportedState, ReportStateRequestSchema } from '@leoflow/protocol';
import { retryBackoffSeconds, type DagSpec } from '@leoflow/core';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createHarness,
  spec,
  task,
  type Harness,
  type RecordedLaunch,
} from '../support/harness.js';
import { access, heartbeat, report } from './support.js';

/**
 * Issue 41's shapes through the real scheduler, store and agent RPC (manual clock, recording
 * executor; the test plays the agents). The credential plane holds for every map index, setup
 * and teardown: each gets exactly its own attempt identity, keyed by (run, task, map index, try).
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

async function setup(s: DagSpec): Promise<void> {
  h = await createHarness({ scoping: 'enforce', liveness: 'enforce' });
  const now = h.clock.now();
  await h.vault.setVariable('default', 'v1', 'one', { secret: true }, now);
  await h.store.putDagVersion(
    'default',
    s,
    createHash('sha256').update(JSON.stringify(s)).digest('hex'),
    now,
  );
}

async function register(l: RecordedLaunch): Promise<void> {
  const reg = await h.agent(l.token).register({
    agentVersion: 't',
    hostname: 'h',
    pid: 1,
    sessionKey: `s-${l.identity.task_instance_id}-${l.identity.try_number}`,
  });
  expect(reg.shouldTerminate).toBe(false);
}

async function dispatched(): Promise<RecordedLaunch[]> {
  await h.scheduler.tick();
  const ls = h.executor.take();
  for (const l of ls) await register(l);
  return ls;
}

async function states(dagId: string): Promise<string[]> {
  const [run] = await h.store.listRuns('default', { dag_id: dagId }, { limit: 1, offset: 0 });
  const tis = await h.store.listTaskInstances(run!.id);
  return tis.map((t) => `${t.task_id}${t.map_index >= 0 ? `[${t.map_index}]` : ''}:${t.state}`);
}

async function push(l: RecordedLaunch, value: string) {
  return h.agent(l.token).pushXCom({
    key: 'return_value',
    value: new TextEncoder().encode(value),
    contentType: 'text/plain',
  });
}

const MAPPED = spec({
  dag_id: 'mapped',
  variables: ['v1'],
  tasks: [
    task('process', {
      expand: [{ env: 'FILE', values: ['a.csv', 'b.csv', 'c.csv', 'd.csv', 'e.csv'] }],
      retries: 1,
      retry_delay_seconds: 0,
      do_xcom_push: true,
    }),
    task('reduce', { depends_on: ['process'] }),
  ],
});

describe('dynamic task mapping: each map index its own attempt and credential', () => {
  it("index 3's token resolves nothing for index 4 (liveness keys on the map index, D3)", async () => {
    await setup(MAPPED);
    await h.runs.trigger('default', 'mapped', {});
    const launches = await dispatched();
    expect(launches.map((l) => l.identity.map_index)).toEqual([0, 1, 2, 3, 4]);
    // every index is the same task at the same try, told apart only by its map index
    expect(
      new Set(launches.map((l) => `${l.identity.task_id}#${l.identity.try_number}`)).size,
    ).toBe(1);
    const byIndex = new Map(launches.map((l) => [l.identity.map_index, l]));
    const three = byIndex.get(3)!;
    const four = byIndex.get(4)!;
    expect((await h.tokens.verify(three.token, h.clock.now())).map_index).toBe(3);
    expect(await access(h, three.token)).toBe('delivered');
    await report(h, three.token, 'success');
    // index 3 finished; index 4 (same run, task and try) is still running
    expect(await access(h, three.token)).toBe('denied');
    expect(await access(h, four.token)).toBe('delivered');
    // its heartbeat is told to stop, index 4's is renewed
    expect((await heartbeat(h, three.token))?.shouldTerminate).toBe(true);
    expect((await heartbeat(h, four.token))?.renewedToken).not.toBe('');
    // and what each index was delivered is recorded on its own attempt
    const records = await h.store.listAttemptRecords(four.identity.dag_run_id, 'process');
    expect(records.map((r) => [r.map_index, r.variables_delivered])).toEqual(
      expect.arrayContaining([
        [3, ['v1']],
        [4, ['v1']],
      ]),
    );
  });

  it('a retried map index gets a fresh credential; the old one dies, the other indexes are untouched', async () => {
    await setup(MAPPED);
    await h.runs.trigger('default', 'mapped', {});
    const launches = await dispatched();
    const two = launches.find((l) => l.identity.map_index === 2)!;
    await report(h, two.token, 'failed');
    const retried = await dispatched();
    expect(retried.map((l) => [l.identity.map_index, l.identity.try_number])).toEqual([[2, 2]]);
    const again = retried[0]!;
    expect(again.token).not.toBe(two.token);
    expect(again.identity.task_instance_id).toBe(two.identity.task_instance_id);
    expect(await access(h, two.token)).toBe('denied');
    expect(await access(h, again.token)).toBe('delivered');
    for (const l of launches.filter((x) => x.identity.map_index !== 2)) {
      expect(await access(h, l.token)).toBe('delivered');
    }
    const [run] = await h.store.listRuns('default', { dag_id: 'mapped' }, { limit: 1, offset: 0 });
    const history = await h.store.listTaskInstanceHistory(run!.id, 'process');
    expect(history.map((x) => [x.map_index, x.try_number, x.state])).toEqual([[2, 1, 'failed']]);
  });

  it('gives each index its own arguments and LEOFLOW_MAP_INDEX, and the reduce reads every return value as one list', async () => {
    await setup(MAPPED);
    await h.runs.trigger('default', 'mapped', {});
    const launches = await dispatched();
    for (const l of launches) {
      expect(l.agentSpec?.mapIndex).toBe(l.identity.map_index);
      expect(l.agentSpec?.env.FILE).toBe(`${'abcde'[l.identity.map_index!]}.csv`);
    }
    // pushed out of order; read back in map-index order, JSON kept as JSON, text as strings
    for (const l of [...launches].reverse()) {
      const i = l.identity.map_index!;
      expect((await push(l, i === 1 ? 'plain text' : `{"rows": ${i}}`)).accepted).toBe(true);
      await report(h, l.token, 'success');
    }
    const [reduce] = await dispatched();
    expect(reduce?.identity.task_id).toBe('reduce');
    expect(reduce?.identity.map_index).toBe(-1);
    const x = await h.agent(reduce!.token).fetchXCom({ upstreamTaskId: 'process' });
    expect(JSON.parse(new TextDecoder().decode(x.value))).toEqual([
      { rows: 0 },
      'plain text',
      { rows: 2 },
      { rows: 3 },
      { rows: 4 },
    ]);
    expect(x.contentType).toBe('application/json');
  });

  it('expands over an upstream return value, refuses a push that is not a list, skips a zero-length one', async () => {
    const s = spec({
      dag_id: 'fanout',
      tasks: [
        task('list_files', { do_xcom_push: true }),
        task('process', { depends_on: ['list_files'], expand: [{ env: 'F', xcom: 'list_files' }] }),
        task('after', { depends_on: ['process'], trigger_rule: 'all_done' }),
      ],
    });
    await setup(s);
    await h.runs.trigger('default', 'fanout', {});
    const [list] = await dispatched();
    const refused = await push(list!, '{"not": "a list"}');
    expect(refused.accepted).toBe(false);
    expect(refused.rejectionReason).toMatch(/^LF_MAP_NOT_A_LIST: /);
    expect((await push(list!, '["x", "y"]')).accepted).toBe(true);
    await report(h, list!.token, 'success');
    const mapped = await dispatched();
    expect(mapped.map((l) => [l.identity.map_index, l.agentSpec?.env.F])).toEqual([
      [0, 'x'],
      [1, 'y'],
    ]);
    // a second run whose list is empty: the mapped task is skipped, not failed
    const second = await h.runs.trigger('default', 'fanout', {});
    const [list2] = await dispatched();
    await push(list2!, '[]');
    await report(h, list2!.token, 'success');
    await h.scheduler.tick(); // expands to nothing: skipped
    await h.scheduler.tick(); // its all_done downstream runs
    // by its id: both runs were triggered at the same instant of the manual clock, so "the
    // newest" of a listing is either
    const tis = await h.store.listTaskInstances(second.id);
    expect(tis.map((t) => `${t.task_id}:${t.state}`).sort()).toEqual([
      'after:queued',
      'list_files:success',
      'process:skipped',
    ]);
  });

  it('refuses a push longer than max_map_length, and fails the expansion of a product past it', async () => {
    const s = spec({
      dag_id: 'toolong',
      tasks: [
        task('list', { do_xcom_push: true }),
        task('p', {
          depends_on: ['list'],
          expand: [
            { env: 'F', xcom: 'list' },
            { env: 'G', values: [1, 2] },
          ],
          max_map_length: 3,
        }),
      ],
    });
    await setup(s);
    await h.runs.trigger('default', 'toolong', {});
    const [list] = await dispatched();
    const refused = await push(list!, '[1, 2, 3, 4]');
    expect(refused.rejectionReason).toMatch(/^LF_MAP_TOO_LONG: .*at most 3/);
    expect((await push(list!, '[1, 2]')).accepted).toBe(true);
    await report(h, list!.token, 'success');
    await h.scheduler.tick();
    expect(await states('toolong')).toEqual(['list:success', 'p:upstream_failed']);
    const [run] = await h.store.listRuns('default', { dag_id: 'toolong' }, { limit: 1, offset: 0 });
    expect((await h.store.getTaskInstance(run!.id, 'p'))?.error_message).toMatch(
      /^LF_MAP_TOO_LONG: task "p" would expand to 4 map indexes/,
    );
  });
});

describe('branching, short-circuit, setup/teardown and backoff through the scheduler', () => {
  it('follows the branch its return value names, skips the other, and the join runs', async () => {
    const s = spec({
      dag_id: 'branchy',
      tasks: [
        task('choose', { branch: { mode: 'return_value' }, do_xcom_push: true }),
        task('fast', { depends_on: ['choose'] }),
        task('slow', { depends_on: ['choose'] }),
        task('join', { depends_on: ['fast', 'slow'], trigger_rule: 'none_failed_min_one_success' }),
      ],
    });
    await setup(s);
    await h.runs.trigger('default', 'branchy', {});
    const [choose] = await dispatched();
    await push(choose!, '"fast"');
    await report(h, choose!.token, 'success');
    const [fast] = await dispatched();
    expect(fast?.identity.task_id).toBe('fast');
    expect(await states('branchy')).toEqual([
      'choose:success',
      'fast:running',
      'join:none',
      'slow:skipped',
    ]);
    await report(h, fast!.token, 'success');
    const [join] = await dispatched();
    expect(join?.identity.task_id).toBe('join');
    const [run] = await h.store.listRuns('default', { dag_id: 'branchy' }, { limit: 1, offset: 0 });
    expect((await h.store.getTaskInstance(run!.id, 'choose'))?.decision).toEqual({
      followed: ['fast'],
      skipped: ['slow'],
    });
  });

  it('maps an exit code to a branch (the attempt succeeds), and fails an unknown branch target with a code', async () => {
    const s = spec({
      dag_id: 'exitcodes',
      tasks: [
        task('check', {
          branch: { mode: 'exit_code', exit_codes: { '3': ['incremental'] } },
        }),
        task('full', { depends_on: ['check'] }),
        task('incremental', { depends_on: ['check'] }),
        task('pick', { branch: { mode: 'return_value' }, do_xcom_push: true }),
        task('after_pick', { depends_on: ['pick'] }),
      ],
    });
    await setup(s);
    await h.runs.trigger('default', 'exitcodes', {});
    const ls = await dispatched();
    const check = ls.find((l) => l.identity.task_id === 'check')!;
    const pick = ls.find((l) => l.identity.task_id === 'pick')!;
    await h
      .agent(check.token)
      .reportState(create(ReportStateRequestSchema, { state: ReportedState.FAILED, exitCode: 3 }));
    await push(pick, '["afterpick"]');
    await report(h, pick.token, 'success');
    await h.scheduler.tick();
    const st = await states('exitcodes');
    expect(st).toContain('check:success');
    expect(st).toContain('full:skipped');
    expect(st).toContain('incremental:queued');
    expect(st).toContain('pick:failed');
    const [run] = await h.store.listRuns(
      'default',
      { dag_id: 'exitcodes' },
      { limit: 1, offset: 0 },
    );
    expect((await h.store.getTaskInstance(run!.id, 'pick'))?.error_message).toMatch(
      /^LF_BRANCH_INVALID: .*"afterpick"/,
    );
  });

  it('runs the teardown after a failed work task (its setup ran), and the run fails by the work, not the teardown', async () => {
    const s = spec({
      dag_id: 'cluster',
      variables: ['v1'],
      tasks: [
        task('create', { setup: true }),
        task('work', { depends_on: ['create'] }),
        task('delete', {
          depends_on: ['create', 'work'],
          teardown: true,
          trigger_rule: 'all_done_setup_success',
        }),
      ],
    });
    await setup(s);
    await h.runs.trigger('default', 'cluster', {});
    const [create1] = await dispatched();
    expect(await access(h, create1!.token)).toBe('delivered');
    await report(h, create1!.token, 'success');
    const [work] = await dispatched();
    await report(h, work!.token, 'failed');
    const [teardown] = await dispatched();
    expect(teardown?.identity.task_id).toBe('delete');
    // the teardown gets its own credential, audited like any task
    expect(await access(h, teardown!.token)).toBe('delivered');
    await report(h, teardown!.token, 'success');
    await h.scheduler.tick();
    const [run] = await h.store.listRuns('default', { dag_id: 'cluster' }, { limit: 1, offset: 0 });
    expect(run?.state).toBe('failed');
    // clearing the work clears its setup and teardown with it
    const cleared = await h.runs.clear('default', 'cluster', run!.run_id, {
      taskIds: ['work'],
      downstream: false,
    });
    expect(cleared.cleared).toEqual(['create', 'work', 'delete']);
  });

  it("schedules a retry after Airflow's exponential backoff", async () => {
    const s = spec({
      dag_id: 'backoff',
      tasks: [task('flaky', { retries: 3, retry_delay_seconds: 10, retry_exponential_backoff: 2 })],
    });
    await setup(s);
    await h.runs.trigger('default', 'backoff', {});
    const [first] = await dispatched();
    await report(h, first!.token, 'failed');
    await report(h, (await retryAfterDelay())!.token, 'failed');
    const [run] = await h.store.listRuns('default', { dag_id: 'backoff' }, { limit: 1, offset: 0 });
    const ti = await h.store.getTaskInstance(run!.id, 'flaky');
    const expected = retryBackoffSeconds({
      multiplier: 2,
      dagId: 'backoff',
      taskId: 'flaky',
      logicalDate: run!.logical_date,
      retryDelaySeconds: 10,
      tryNumber: 2,
    });
    expect(ti?.retry_at).toBe(h.clock.now() + expected * 1000);
    expect(expected).toBeGreaterThanOrEqual(20);
    expect(expected).toBeLessThan(40);
  });
});

/** Moves the clock past the pending retry and dispatches it. */
async function retryAfterDelay(): Promise<RecordedLaunch | undefined> {
  const [run] = await h.store.listRuns('default', {}, { limit: 1, offset: 0 });
  const tis = await h.store.listTaskInstances(run!.id);
  const at = Math.max(...tis.map((t) => t.retry_at ?? 0));
  h.clock.advance(Math.max(0, at - h.clock.now()));
  return (await dispatched())[0];
}
