import { createHash } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { ReportedState, ReportStateRequestSchema } from '@leoflow/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createHarness,
  spec,
  T0,
  task,
  type Harness,
  type RecordedLaunch,
} from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await createHarness();
});
afterEach(async () => {
  await h.close();
});

function hash(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

async function push(s: ReturnType<typeof spec>) {
  return h.store.putDagVersion('default', s, hash(JSON.stringify(s)), h.clock.now());
}

/** Plays a well-behaved agent for one launch: register, then report the given outcome. */
async function play(
  launch: RecordedLaunch,
  outcome: 'success' | 'failed',
  exitCode = outcome === 'success' ? 0 : 1,
) {
  const agent = h.agent(launch.token);
  await agent.register({ agentVersion: 'test', hostname: 'h', pid: 1 });
  return agent.reportState(
    create(ReportStateRequestSchema, {
      state: outcome === 'success' ? ReportedState.SUCCESS : ReportedState.FAILED,
      exitCode,
    }),
  );
}

async function states(runId: string, dagId: string) {
  const run = await h.store.getRun('default', dagId, runId);
  const tis = await h.store.listTaskInstances(run!.id);
  return {
    run: run!.state,
    tasks: Object.fromEntries(tis.map((t) => [t.task_id, `${t.state}#${t.try_number}`])),
  };
}

describe('scheduler over a manual clock', () => {
  it('runs a three-task chain to success in dependency order', async () => {
    await push(
      spec({
        dag_id: 'chain',
        tasks: [task('a'), task('b', { depends_on: ['a'] }), task('c', { depends_on: ['b'] })],
      }),
    );
    const run = await h.runs.trigger('default', 'chain', {});
    for (const expected of ['a', 'b', 'c']) {
      await h.scheduler.tick();
      const launched = h.executor.take();
      expect(launched.map((l) => l.identity.task_id)).toEqual([expected]);
      await play(launched[0]!, 'success');
    }
    await h.scheduler.tick();
    expect(await states(run.run_id, 'chain')).toEqual({
      run: 'success',
      tasks: { a: 'success#1', b: 'success#1', c: 'success#1' },
    });
  });

  it('retries after the delay, then fails; downstream becomes upstream_failed', async () => {
    await push(
      spec({
        dag_id: 'flaky',
        tasks: [
          task('x', { retries: 1, retry_delay_seconds: 60 }),
          task('y', { depends_on: ['x'] }),
        ],
      }),
    );
    const run = await h.runs.trigger('default', 'flaky', {});
    await h.scheduler.tick();
    await play(h.executor.take()[0]!, 'failed');
    expect((await states(run.run_id, 'flaky')).tasks.x).toBe('up_for_retry#2');

    h.clock.advance(59_000);
    await h.scheduler.tick();
    expect(h.executor.take()).toHaveLength(0);

    h.clock.advance(1_000);
    await h.scheduler.tick();
    const retry = h.executor.take();
    expect(retry.map((l) => `${l.identity.task_id}#${l.identity.try_number}`)).toEqual(['x#2']);
    await play(retry[0]!, 'failed');
    await h.scheduler.tick();
    expect(await states(run.run_id, 'flaky')).toEqual({
      run: 'failed',
      tasks: { x: 'failed#2', y: 'upstream_failed#1' },
    });
    const history = await h.store.listTaskInstanceHistory(
      (await h.store.getRun('default', 'flaky', run.run_id))!.id,
      'x',
    );
    expect(history.map((r) => `${r.state}#${r.try_number}`)).toEqual(['failed#1']);
  });

  it('clear-and-rerun gives a new try, keeps history and binds the run to the current version', async () => {
    await push(spec({ dag_id: 'rerun', tasks: [task('a'), task('b', { depends_on: ['a'] })] }));
    const run = await h.runs.trigger('default', 'rerun', {});
    await h.scheduler.tick();
    await play(h.executor.take()[0]!, 'failed');
    await h.scheduler.tick();
    expect((await states(run.run_id, 'rerun')).run).toBe('failed');

    // A year later, with a new version of the DAG: clearing must still work.
    h.clock.advance(365 * 24 * 3600_000);
    const v2 = await push(
      spec({
        dag_id: 'rerun',
        description: 'v2',
        tasks: [task('a', { command: 'echo v2' }), task('b', { depends_on: ['a'] })],
      }),
    );
    expect(v2.version).toBe(2);
    const cleared = await h.runs.clear('default', 'rerun', run.run_id, {
      taskIds: ['a'],
      downstream: true,
    });
    expect(cleared.cleared).toEqual(['a', 'b']);
    expect(cleared.run.dag_version).toBe(2);

    await h.scheduler.tick();
    const relaunch = h.executor.take();
    expect(relaunch.map((l) => `${l.identity.task_id}#${l.identity.try_number}`)).toEqual(['a#2']);
    await play(relaunch[0]!, 'success');
    await h.scheduler.tick();
    await play(h.executor.take()[0]!, 'success');
    await h.scheduler.tick();
    expect(await states(run.run_id, 'rerun')).toEqual({
      run: 'success',
      tasks: { a: 'success#2', b: 'success#2' },
    });
  });

  it('clearing a run gives tasks added in the current version their own task instances', async () => {
    await push(spec({ dag_id: 'grow', tasks: [task('a')] }));
    const run = await h.runs.trigger('default', 'grow', {});
    await h.scheduler.tick();
    await play(h.executor.take()[0]!, 'success');
    await h.scheduler.tick();
    await push(spec({ dag_id: 'grow', tasks: [task('a'), task('b', { depends_on: ['a'] })] }));
    await h.runs.clear('default', 'grow', run.run_id, { taskIds: null, downstream: true });
    await h.scheduler.tick();
    await play(h.executor.take()[0]!, 'success');
    await h.scheduler.tick();
    await play(h.executor.take()[0]!, 'success');
    await h.scheduler.tick();
    expect(await states(run.run_id, 'grow')).toEqual({
      run: 'success',
      tasks: { a: 'success#2', b: 'success#1' },
    });
  });

  it('refuses to clear an active task instance', async () => {
    await push(spec({ dag_id: 'busy', tasks: [task('a')] }));
    const run = await h.runs.trigger('default', 'busy', {});
    await h.scheduler.tick();
    await expect(
      h.runs.clear('default', 'busy', run.run_id, { taskIds: ['a'], downstream: false }),
    ).rejects.toMatchObject({
      code: 'LF_TASK_ACTIVE',
    });
  });

  it('a report from a superseded try changes nothing and answers should_terminate', async () => {
    await push(
      spec({ dag_id: 'stale', tasks: [task('a', { retries: 1, retry_delay_seconds: 0 })] }),
    );
    const run = await h.runs.trigger('default', 'stale', {});
    await h.scheduler.tick();
    const first = h.executor.take()[0]!;
    await h.agent(first.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
    // The control plane gives up on try 1 (e.g. reaped) and moves on to try 2.
    h.clock.advance(91_000);
    await h.scheduler.tick();
    await h.scheduler.tick();
    const second = h.executor.take();
    expect(second.map((l) => l.identity.try_number)).toEqual([2]);

    const late = await h
      .agent(first.token)
      .reportState(create(ReportStateRequestSchema, { state: ReportedState.SUCCESS }));
    expect(late.acknowledged).toBe(true);
    expect(late.shouldTerminate).toBe(true);
    const hb = await h.agent(first.token).heartbeat({});
    expect(hb.shouldTerminate).toBe(true);
    expect(hb.renewedToken).toBe('');
    expect((await states(run.run_id, 'stale')).tasks.a).toBe('queued#2');

    // The live try is never wrongly refused.
    const ok = await play(second[0]!, 'success');
    expect(ok.shouldTerminate).toBe(false);
  });

  it('heartbeats of a live attempt renew its credential with the same oiat', async () => {
    await push(spec({ dag_id: 'hb', tasks: [task('a')] }));
    await h.runs.trigger('default', 'hb', {});
    await h.scheduler.tick();
    const launch = h.executor.take()[0]!;
    await h.agent(launch.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
    h.clock.advance(15_000);
    const hb = await h.agent(launch.token).heartbeat({});
    expect(hb.shouldTerminate).toBe(false);
    expect(hb.renewedToken).not.toBe('');
    const before = await h.tokens.verify(launch.token, h.clock.now());
    const after = await h.tokens.verify(hb.renewedToken, h.clock.now());
    expect(after.oiat).toBe(before.oiat);
    expect(after.exp).toBe(Math.floor(h.clock.now() / 1000) + 600);
  });

  it('the agent-lost reaper fails a silent attempt after the threshold, and not before', async () => {
    await push(spec({ dag_id: 'lost', tasks: [task('a')] }));
    const run = await h.runs.trigger('default', 'lost', {});
    await h.scheduler.tick();
    const launch = h.executor.take()[0]!;
    await h.agent(launch.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
    h.clock.advance(90_000);
    await h.scheduler.tick();
    expect((await states(run.run_id, 'lost')).tasks.a).toBe('running#1');
    h.clock.advance(1_000);
    await h.scheduler.tick();
    const ti = (
      await h.store.listTaskInstances((await h.store.getRun('default', 'lost', run.run_id))!.id)
    )[0]!;
    expect(ti.state).toBe('failed');
    expect(ti.error_message).toMatch(/^agent_lost:/);
    expect(h.executor.terminated).toEqual([`${ti.id}#1`]);
  });

  it('the dispatch-lost reaper retries an attempt whose agent never started', async () => {
    await push(
      spec({ dag_id: 'nostart', tasks: [task('a', { retries: 1, retry_delay_seconds: 0 })] }),
    );
    const run = await h.runs.trigger('default', 'nostart', {});
    await h.scheduler.tick();
    h.executor.take();
    h.clock.advance(180_001);
    await h.scheduler.tick();
    await h.scheduler.tick();
    expect((await states(run.run_id, 'nostart')).tasks.a).toBe('queued#2');
    expect(h.executor.take().map((l) => l.identity.try_number)).toEqual([2]);
  });

  it('the control plane enforces execution_timeout when the agent does not', async () => {
    await push(spec({ dag_id: 'slow', tasks: [task('a', { execution_timeout_seconds: 60 })] }));
    const run = await h.runs.trigger('default', 'slow', {});
    await h.scheduler.tick();
    const launch = h.executor.take()[0]!;
    const agent = h.agent(launch.token);
    await agent.register({ agentVersion: 't', hostname: 'h', pid: 1 });
    // timeout 60 s + 30 s grace: still running at exactly 90 s, failed just after.
    for (let i = 0; i < 6; i++) {
      h.clock.advance(15_000);
      await agent.heartbeat({});
      await h.scheduler.tick();
    }
    expect((await states(run.run_id, 'slow')).tasks.a).toBe('running#1');
    h.clock.advance(1);
    await h.scheduler.tick();
    expect((await states(run.run_id, 'slow')).tasks.a).toBe('failed#1');
  });

  it('max_active_tasks bounds concurrent attempts of a DAG', async () => {
    await push(
      spec({
        dag_id: 'wide',
        max_active_tasks: 2,
        tasks: ['a', 'b', 'c', 'd', 'e'].map((id) => task(id)),
      }),
    );
    await h.runs.trigger('default', 'wide', {});
    await h.scheduler.tick();
    const first = h.executor.take();
    expect(first).toHaveLength(2);
    await h.scheduler.tick();
    expect(h.executor.take()).toHaveLength(0);
    await play(first[0]!, 'success');
    await h.scheduler.tick();
    expect(h.executor.take()).toHaveLength(1);
  });

  it('max_active_runs keeps extra runs queued', async () => {
    await push(spec({ dag_id: 'serial', max_active_runs: 1, tasks: [task('a')] }));
    const r1 = await h.runs.trigger('default', 'serial', { runId: 'r1' });
    h.clock.advance(1);
    const r2 = await h.runs.trigger('default', 'serial', { runId: 'r2' });
    await h.scheduler.tick();
    expect((await states(r1.run_id, 'serial')).run).toBe('running');
    expect((await states(r2.run_id, 'serial')).run).toBe('queued');
    await play(h.executor.take()[0]!, 'success');
    await h.scheduler.tick();
    await h.scheduler.tick();
    expect((await states(r1.run_id, 'serial')).run).toBe('success');
    expect((await states(r2.run_id, 'serial')).run).toBe('running');
  });

  it('creates scheduled runs with catchup, idempotently across ticks and restarts', async () => {
    await push(
      spec({
        dag_id: 'hourly',
        schedule: '@hourly',
        start_date: new Date(T0 - 3 * 3600_000).toISOString(),
        catchup: true,
        tasks: [task('a')],
      }),
    );
    await h.scheduler.tick();
    await h.scheduler.tick();
    await h.restart().tick();
    const runs = await h.store.listRuns('default', { dag_id: 'hourly' }, { limit: 100, offset: 0 });
    expect(runs.map((r) => r.run_id).sort()).toEqual([
      'scheduled__2026-08-20T09:00:00.000Z',
      'scheduled__2026-08-20T10:00:00.000Z',
      'scheduled__2026-08-20T11:00:00.000Z',
    ]);
  });

  it('a restarted scheduler finishes the run without dispatching any attempt twice', async () => {
    await push(spec({ dag_id: 'crash', tasks: [task('a'), task('b', { depends_on: ['a'] })] }));
    const run = await h.runs.trigger('default', 'crash', {});
    await h.scheduler.tick();
    const a = h.executor.take();
    // The first process dies here; its agent keeps running and reports to the successor.
    const successor = h.restart();
    await successor.tick();
    expect(h.executor.take()).toHaveLength(0);
    await play(a[0]!, 'success');
    await successor.tick();
    const b = h.executor.take();
    expect(b.map((l) => l.identity.task_id)).toEqual(['b']);
    await play(b[0]!, 'success');
    await successor.tick();
    expect((await states(run.run_id, 'crash')).run).toBe('success');
  });
});
