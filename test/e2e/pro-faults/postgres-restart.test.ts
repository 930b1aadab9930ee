import { afterEach, describe, expect, it } from 'vitest';
import { readExecutions } from '../../support/history-checker.js';
import { waitFor } from '../../support/processes.js';
import { readinessVerdict, startFaultCase, type FaultCase } from './fault-case.js';

// PostgreSQL goes away under two replicas with runs in flight: the case's OWN cluster (initdb'd
// into a temp dir, its own port; the shared 5432 cluster is never touched). A fast restart
// (what an operator's `systemctl restart` does) and a 30 s stop. The replicas stay up, their
// readiness turns 503 while the store is gone and 200 once it is back, and every run completes
// on its first tries: agents hold their reports and retry until the store answers again.

let c: FaultCase | undefined;
afterEach(async () => {
  await c?.close();
  c = undefined;
});

async function runsInFlight(fc: FaultCase, prefix: string): Promise<void> {
  for (let i = 0; i < 4; i++) expect(await fc.trigger(`${prefix}-${i}`)).toBe('ok');
  await waitFor(
    'the four runs to have tasks running',
    async () => (new Set(readExecutions(fc.marks).map((e) => e.run)).size >= 4 ? true : undefined),
    60_000,
  );
  await fc.runsInFlight();
}

/** '' when every replica still runs; else who exited, how, and the end of its output */
const exited = (fc: FaultCase) =>
  [...fc.replicas.values()]
    .filter((r) => r.proc.exitCode !== null || r.proc.signalCode !== null)
    .map(
      (r) =>
        `replica ${r.spec.name} exited (${r.proc.exitCode ?? r.proc.signalCode}):\n${r.output().slice(-3_000)}`,
    )
    .join('\n');

describe('Pro faults: PostgreSQL restarts under the replicas', () => {
  it('a fast restart: replicas stay up, every run completes on its first tries', async () => {
    c = await startFaultCase({ label: 'pgrestart' });
    await c.leader();
    await runsInFlight(c, 'pgfast');
    const faultAt = Date.now();
    await c.pg.restart();
    const backAt = Date.now();
    await c.settle(120_000);
    expect(exited(c)).toBe('');
    // A restart of a second or two: a sample during it may say either; before and well after,
    // ready.
    const truth = readinessVerdict(c.readiness, (s) =>
      s.at < faultAt || s.at > backAt + 10_000 ? 'ready' : 'any',
    );
    const { report } = await c.finish('PostgreSQL fast restart', faultAt, truth);
    expect(report.problems).toEqual([]);
    expect(report.runs).toBe(4);
    expect(truth).toEqual({ truthful: true, note: expect.any(String) });
  }, 300_000);

  it('a 30 s stop: readiness is 503 while the store is gone and 200 after, every run completes on its first tries', async () => {
    // The outage is shorter than the agent-lost threshold, as with the default 90 s: an attempt
    // whose heartbeats could not be written for 30 s is not lost.
    c = await startFaultCase({ label: 'pgstop', agentLostThreshold: '45s' });
    await c.leader();
    await runsInFlight(c, 'pgstop');
    const faultAt = Date.now();
    await c.pg.stop('fast');
    const stoppedAt = Date.now();
    await new Promise((r) => setTimeout(r, 30_000));
    const restartAt = Date.now();
    await c.pg.start();
    const backAt = Date.now();
    await c.settle(150_000);
    expect(exited(c)).toBe('');
    const truth = readinessVerdict(c.readiness, (s) => {
      if (s.at < faultAt) return 'ready';
      // the pool notices within a probe's store check (it runs a query each time)
      if (s.at > stoppedAt + 3_000 && s.done < restartAt) return 'not-ready';
      if (s.at > backAt + 10_000) return 'ready';
      return 'any';
    });
    const during = c.readiness.filter((s) => s.at > stoppedAt + 3_000 && s.done < restartAt);
    expect(during.length).toBeGreaterThan(20);
    expect(
      during.every((s) => s.status === 503 && s.failing.some((f) => f.startsWith('store'))),
    ).toBe(true);
    const { report } = await c.finish('PostgreSQL stopped 30 s', faultAt, truth);
    expect(report.problems).toEqual([]);
    expect(report.runs).toBe(4);
    expect(truth).toEqual({ truthful: true, note: expect.any(String) });
  }, 300_000);
});
