import { afterEach, describe, expect, it } from 'vitest';
import type { Leadership } from '../../src/scheduler/leadership/leadership.js';
import { SoleLeadership } from '../../src/scheduler/leadership/leadership.js';
import { createHarness, spec, T0, task, type Harness } from '../support/harness.js';

/** A leadership the test switches on and off (Lite's sole fence while on). */
function switchable() {
  const sole = new SoleLeadership();
  const state = { leading: true };
  const leadership: Leadership = {
    fence: () => (state.leading ? sole.fence() : null),
    onChange: () => undefined,
  };
  return { leadership, state };
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('the scheduler under leadership', () => {
  it('Lite always leads: SoleLeadership gives the fixed epoch and a fence with nothing to check', () => {
    expect(new SoleLeadership().fence()).toEqual({ kind: 'sole', epoch: 1 });
  });

  it('skips its whole tick when it is not the leader', async () => {
    const { leadership, state } = switchable();
    h = await createHarness({ leadership });
    await h.store.putDagVersion(
      'default',
      spec({
        dag_id: 'hourly',
        schedule: '@hourly',
        start_date: new Date(T0 - 3 * 3600_000).toISOString(),
        tasks: [task('a')],
      }),
      'h1',
      T0,
    );
    const manual = await h.runs.trigger('default', 'hourly', {});
    state.leading = false;
    await h.scheduler.tick();
    await h.scheduler.tick();
    expect(h.executor.take()).toEqual([]);
    const runs = await h.store.listRuns('default', { dag_id: 'hourly' }, { limit: 10, offset: 0 });
    expect(runs.map((r) => `${r.run_type}:${r.state}`)).toEqual(['manual:queued']);

    state.leading = true;
    await h.scheduler.tick();
    expect(h.executor.take().length).toBeGreaterThan(0);
    expect((await h.store.getRunById(manual.id))?.state).toBe('running');
  });

  it('stops claiming in the middle of a dispatch as soon as its leadership ends', async () => {
    const { leadership, state } = switchable();
    h = await createHarness({ leadership });
    await h.store.putDagVersion(
      'default',
      spec({ dag_id: 'wide', tasks: [task('a'), task('b'), task('c')] }),
      'h1',
      T0,
    );
    const run = await h.runs.trigger('default', 'wide', {});
    // The deadline passes while the first agent is being started.
    const start = h.executor.start.bind(h.executor);
    h.executor.start = async (launch) => {
      await start(launch);
      state.leading = false;
    };
    await h.scheduler.tick();
    expect(h.executor.take()).toHaveLength(1);
    const tis = await h.store.listTaskInstances(run.id);
    expect(tis.map((t) => t.state).sort()).toEqual(['queued', 'scheduled', 'scheduled']);
  });
});
