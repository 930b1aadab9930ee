/**
 * Executor port v2, the scheduler's side: a claim records the executor holding it; the reapers,
 * revoke and terminate go to that executor even when it is not the default; the dispatch-lost
 * reaper keeps a claim its executor still says it is starting (up to that executor's own start
 * timeout) and fails it after; the executor mints the credential, not the scheduler.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { revokeAttemptCredential } from '../../src/attempts/revocation.js';
import type { ClaimProbe } from '../../src/executor/executor.js';
import { createHarness, RecordingExecutor, spec, task, type Harness } from '../support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function setup(opts: Parameters<typeof createHarness>[0] = {}) {
  h = await createHarness(opts);
  const s = spec({ dag_id: 'routed', tasks: [task('t', { retries: 1 })] });
  const hash = createHash('sha256').update(JSON.stringify(s)).digest('hex');
  await h.store.putDagVersion('default', s, hash, h.clock.now());
  const run = await h.runs.trigger('default', 'routed', {});
  const ti = async () => (await h!.store.listTaskInstances(run.id))[0]!;
  const history = () => h!.store.listTaskInstanceHistory(run.id);
  return { h, run, ti, history };
}

/** Makes the executor answer probeClaim with whatever `answer` holds at the time. */
function probing(e: RecordingExecutor, answer: { current: ClaimProbe }): void {
  (e as RecordingExecutor & { probeClaim: () => ClaimProbe }).probeClaim = () => answer.current;
}

/**
 * A running attempt whose claim records a second executor, `other`, as if that had been the
 * default when the claim was made; the recording executor is the default now.
 */
async function runningOnOther() {
  const other = new RecordingExecutor('other');
  const fixture = await setup({ moreExecutors: [other] });
  const { h, ti } = fixture;
  await h.scheduler.tick();
  const [launch] = h.executor.take();
  await h.agent(launch!.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
  const row = await ti();
  await h.store.updateTaskInstance(
    row.id,
    { states: ['running'], try_number: 1 },
    { executor: 'other' },
    h.clock.now(),
  );
  return { ...fixture, other, row };
}

describe('executor port v2: the scheduler', () => {
  it('records the dispatching executor on the claim, and that executor minted the token', async () => {
    const { h, ti } = await setup();
    await h.scheduler.tick();
    const [launch] = h.executor.take();
    expect((await ti()).executor).toBe('recording');
    const claims = await h.tokens.verify(launch!.token, h.clock.now());
    expect([claims.task_instance_id, claims.dispatch_gen]).toEqual([(await ti()).id, 1]);
    // A later mint is stamped with its own time: the token's life starts at hand-over.
    h.clock.advance(5_000);
    const again = await launch!.credential.mint();
    const later = await h.tokens.verify(again, h.clock.now());
    expect(later.task_instance_id).toBe((await ti()).id);
    expect(later.iat).toBe(claims.iat + 5);
  });

  it('terminates through the executor recorded on the claim, not the default', async () => {
    const { h, other, row } = await runningOnOther();
    h.clock.advance(91_000); // past agent-lost
    await h.scheduler.tick();
    expect(other.terminated).toEqual([`${row.id}#1`]);
    expect(h.executor.terminated).toEqual([]);
  });

  it('a try that ends and waits for its retry is held by no executor; the next claim records its own', async () => {
    const { h, other, row, ti } = await runningOnOther();
    h.clock.advance(91_000); // past agent-lost: try 1 fails, try 2 waits for its retry
    await h.scheduler.tick();
    expect(other.terminated).toEqual([`${row.id}#1`]);
    const waiting = await ti();
    expect([waiting.state, waiting.try_number, waiting.executor]).toEqual([
      'up_for_retry',
      2,
      null,
    ]);
    h.clock.advance(3_600_000);
    await h.scheduler.tick();
    await h.scheduler.tick();
    const claimed = await ti();
    expect([claimed.state, claimed.try_number, claimed.executor]).toEqual([
      'queued',
      2,
      'recording',
    ]);
  });

  it('revoke with terminate goes to the claim’s executor', async () => {
    const { h, ti, other, row } = await runningOnOther();
    await revokeAttemptCredential(
      {
        store: h.store,
        clock: h.clock,
        executors: h.executors,
        evictAttempt: () => undefined,
      },
      { taskInstance: await ti(), terminate: true },
    );
    expect(other.terminated).toEqual([`${row.id}#1`]);
    expect(h.executor.terminated).toEqual([]);
  });

  it('a claim recorded by an executor that is no longer configured is still reaped by timeout', async () => {
    const { h, ti, history } = await setup();
    await h.scheduler.tick();
    h.executor.take();
    const row = await ti();
    await h.store.updateTaskInstance(
      row.id,
      { states: ['queued'], try_number: 1 },
      { executor: 'gone-away' },
      h.clock.now(),
    );
    h.clock.advance(181_000);
    await h.scheduler.tick();
    expect((await history()).map((x) => x.error_message)).toEqual([
      expect.stringMatching(/^dispatch_lost/),
    ]);
    expect(h.executor.terminated).toEqual([]);
  });

  it('keeps a claim its executor is still starting past dispatch-lost, up to that executor’s timeout', async () => {
    const { h, ti, history } = await setup();
    const answer = { current: { state: 'starting', until: 0 } as ClaimProbe };
    probing(h.executor, answer);
    await h.scheduler.tick();
    h.executor.take();
    const queuedAt = (await ti()).queued_at!;
    answer.current = { state: 'starting', until: queuedAt + 600_000 };

    h.clock.advance(181_000); // past the dispatch-lost threshold (180 s)
    await h.scheduler.tick();
    expect([(await ti()).state, (await history()).length]).toEqual(['queued', 0]);
    expect(h.executor.take()).toEqual([]); // no twin

    h.clock.advance(420_000); // past the executor's own start timeout
    await h.scheduler.tick();
    expect((await history()).map((x) => x.error_message)).toEqual([
      expect.stringMatching(/^dispatch_lost: the recording executor did not start the agent/),
    ]);
  });

  it('an executor that says the agent is merely alive does not extend the claim', async () => {
    const { h, history } = await setup();
    probing(h.executor, { current: { state: 'alive' } });
    await h.scheduler.tick();
    h.executor.take();
    h.clock.advance(181_000);
    await h.scheduler.tick();
    expect((await history()).map((x) => x.error_message)).toEqual([
      expect.stringMatching(/^dispatch_lost: the agent did not start within 180s/),
    ]);
  });

  it('after a restart, waits for a predecessor’s claim its executor is still starting', async () => {
    const { h, ti, history } = await setup();
    const answer = { current: { state: 'starting', until: 0 } as ClaimProbe };
    probing(h.executor, answer);
    h.executor.start = async (launch) => {
      h.executor.launches.push({ ...launch, token: await launch.credential.mint() });
      return { pid: 7, hostname: 'elsewhere' };
    };
    await h.scheduler.tick();
    h.executor.take();
    answer.current = { state: 'starting', until: (await ti()).queued_at! + 600_000 };
    h.clock.advance(1_000);
    const successor = h.restart();
    h.clock.advance(200_000); // past dispatch-lost, before the start timeout
    await successor.tick();
    expect([(await ti()).state, (await history()).length]).toEqual(['queued', 0]);
    h.clock.advance(500_000); // past the start timeout: reset without a try
    await successor.tick();
    const row = await ti();
    expect([row.try_number, (await history()).length]).toEqual([1, 0]);
    expect(h.executor.take().length).toBe(1); // dispatched again, same try
  });

  it('a task naming an executor is dispatched to it, with its spec; the others go to the default', async () => {
    const other = new RecordingExecutor('other');
    h = await createHarness({ moreExecutors: [other] });
    const s = spec({
      dag_id: 'per_task',
      tasks: [task('on_other', { executor: 'other', execution_timeout_seconds: 7 }), task('plain')],
    });
    const hash = createHash('sha256').update(JSON.stringify(s)).digest('hex');
    await h.store.putDagVersion('default', s, hash, h.clock.now());
    const run = await h.runs.trigger('default', 'per_task', {});
    await h.scheduler.tick();
    const [routed] = other.take();
    expect(routed?.identity.task_id).toBe('on_other');
    expect(routed?.task?.execution_timeout_seconds).toBe(7);
    expect(h.executor.take().map((l) => l.identity.task_id)).toEqual(['plain']);
    const rows = await h.store.listTaskInstances(run.id);
    expect(Object.fromEntries(rows.map((r) => [r.task_id, r.executor]))).toEqual({
      on_other: 'other',
      plain: 'recording',
    });
  });

  it('a task naming an executor that is not configured fails at once with the fix, and starts nothing', async () => {
    h = await createHarness();
    const s = spec({ dag_id: 'unroutable', tasks: [task('t', { executor: 'kubernetes' })] });
    const hash = createHash('sha256').update(JSON.stringify(s)).digest('hex');
    await h.store.putDagVersion('default', s, hash, h.clock.now());
    const run = await h.runs.trigger('default', 'unroutable', {});
    await h.scheduler.tick();
    expect(h.executor.take()).toEqual([]);
    const [row] = await h.store.listTaskInstances(run.id);
    expect(row?.state).toBe('failed');
    expect(row?.error_message).toMatch(
      /^LF_EXECUTOR_NOT_CONFIGURED: the task names executor "kubernetes", which this control plane does not run \(configured: recording\)/,
    );
  });
});
