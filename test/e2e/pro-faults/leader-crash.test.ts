import { afterEach, describe, expect, it } from 'vitest';
import { readExecutions } from '../../support/history-checker.js';
import { waitFor } from '../../support/processes.js';
import { leadsNow, readinessVerdict, startFaultCase, type FaultCase } from './fault-case.js';

// Issue 39's new user: two `leoflow server --role all` replicas on one PostgreSQL, each
// advertising its own agent URL with the list given to both, four runs of a slow chain, and the
// leader killed. Before agents followed the list, every run failed: the orphaned agents dialled
// the dead replica until their attempts were reaped. Then the same with a SIGTERM drain.

let c: FaultCase | undefined;
afterEach(async () => {
  await c?.close();
  c = undefined;
});

async function fourRunsInFlight(fc: FaultCase, prefix: string): Promise<void> {
  for (let i = 0; i < 4; i++) expect(await fc.trigger(`${prefix}-${i}`)).toBe('ok');
  await waitFor(
    'the four runs to have tasks running',
    async () => (new Set(readExecutions(fc.marks).map((e) => e.run)).size >= 4 ? true : undefined),
    60_000,
  );
}

describe('Pro faults: the leader goes away, agents on per-replica URLs', () => {
  it('kill -9 of the leader: the other takes over, every orphaned agent carries on with the other URL, every run completes on its first tries', async () => {
    c = await startFaultCase({ label: 'kill9' });
    const leaderName = await c.leader();
    const other = leaderName === 'a' ? 'b' : 'a';
    await fourRunsInFlight(c, 'kill9');
    const inFlight = await c.runsInFlight();
    const leader = c.replicas.get(leaderName)!;
    const faultAt = Date.now();
    await leader.kill9();
    await waitFor(
      'the takeover',
      async () => ((await leadsNow(c!.replicas.get(other)!)) ? true : undefined),
      30_000,
    );
    const takeoverMs = Date.now() - faultAt;
    await c.settle(120_000);
    const truth = readinessVerdict(c.readiness, (s) =>
      s.replica === leaderName ? (s.at < faultAt ? 'ready' : 'any') : 'ready',
    );
    const { report, figures } = await c.finish('leader kill -9', faultAt, truth);
    expect(report.problems).toEqual([]);
    expect(report.runs).toBe(4);
    expect(inFlight).toBeGreaterThanOrEqual(4);
    expect(figures.triesConsumed).toBe(0);
    expect(truth).toEqual({ truthful: true, note: expect.any(String) });
    // ttl + renew interval (3.5 s), plus polling on a loaded machine
    expect(takeoverMs).toBeLessThan(15_000);
  }, 300_000);

  it('SIGTERM drain of the leader: it releases the lease, its agents move to the other URL, nothing is lost', async () => {
    c = await startFaultCase({ label: 'drain' });
    const leaderName = await c.leader();
    await fourRunsInFlight(c, 'drain');
    await c.runsInFlight();
    const leader = c.replicas.get(leaderName)!;
    const faultAt = Date.now();
    expect(await leader.stop()).toBe(0);
    const drainedAt = Date.now();
    await c.settle(120_000);
    // The draining replica says 503 from the signal on; the other stays ready.
    const truth = readinessVerdict(c.readiness, (s) =>
      s.replica === leaderName
        ? s.at < faultAt
          ? 'ready'
          : s.at < drainedAt
            ? 'any'
            : 'any'
        : 'ready',
    );
    const { report } = await c.finish('leader SIGTERM drain', faultAt, truth);
    expect(report.problems).toEqual([]);
    expect(report.runs).toBe(4);
    expect(truth.truthful).toBe(true);
  }, 300_000);
});
