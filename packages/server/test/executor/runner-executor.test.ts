/**
 * The runner executor with the real scheduler (ManualClock): an attempt with no runner connected
 * waits past the dispatch-lost threshold instead of failing, up to the executor's own wait; a
 * terminate while it waits ends it at once; a restart that forgot the queue lets the scheduler
 * reset the claim.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, FAST_TIMINGS, spec, task, type Harness } from '../support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function setup() {
  h = await createHarness({ runners: () => Promise.resolve(undefined) });
  const s = spec({ dag_id: 'wait', tasks: [task('t', { executor: 'runner' })] });
  const hash = createHash('sha256').update(JSON.stringify(s)).digest('hex');
  await h.store.putDagVersion('default', s, hash, h.clock.now());
  const run = await h.runs.trigger('default', 'wait', {});
  await h.scheduler.tick();
  return { h, ti: async () => (await h!.store.listTaskInstances(run.id))[0]! };
}

describe('runner executor', () => {
  it('no runner connected: the attempt waits past the dispatch-lost threshold, and fails only past the runner wait', async () => {
    const { h, ti } = await setup();
    expect((await ti()).state).toBe('queued');
    expect(h.broker!.waiting).toBe(1);
    h.clock.advance(FAST_TIMINGS.dispatchLostThresholdMs + 60_000);
    await h.scheduler.tick();
    expect((await ti()).state).toBe('queued');
    // the other side: past the executor's own wait (24 h) the claim is dispatch_lost
    h.clock.advance(24 * 3600_000);
    await h.scheduler.tick();
    const row = await ti();
    expect(row.state).toBe('failed');
    expect(row.error_message).toMatch(/dispatch_lost: the runner executor did not start/);
  });

  it('terminate while waiting takes it off the queue and fails the attempt', async () => {
    const { h, ti } = await setup();
    const row = await ti();
    await h.runnerExecutor!.terminate(row.id, row.try_number);
    expect(h.broker!.waiting).toBe(0);
    await new Promise((r) => setTimeout(r, 50));
    const after = await ti();
    expect(after.state).toBe('failed');
    expect(after.error_message).toMatch(/LF_RUNNER_CANCELLED/);
  });

  it('a claim the broker does not know (a restart forgot the queue) is gone, so the scheduler resets it', async () => {
    const { h, ti } = await setup();
    const row = await ti();
    h.broker!.cancel(row.id, row.try_number, 'forgotten');
    const probe = h.runnerExecutor!.probeClaim(
      { ...row, task_instance_id: row.id, queued_at: row.queued_at! },
      h.clock.now(),
    );
    expect(probe.state).toBe('gone');
  });
});
