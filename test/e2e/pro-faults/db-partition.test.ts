import { afterEach, describe, expect, it } from 'vitest';
import { readExecutions } from '../../support/history-checker.js';
import { waitFor } from '../../support/processes.js';
import { leadsNow, readinessVerdict, startFaultCase, type FaultCase } from './fault-case.js';

// A partition between the leader and PostgreSQL while it holds the lease: each replica reaches
// the case's own cluster through a TCP proxy the test controls, and the leader's is blackholed
// (open connections go silent, new ones are never answered — what a dropped route looks like).
// The leader cannot renew: its own deadline (ttl − safety margin, on its monotonic clock) ends
// its term before the database's expiry, the other replica takes the lease, and the cut-off
// one's readiness says 503 (its store is unreachable). Its agents' calls fail or time out there
// and move to the other URL of their list. When the route comes back, it rejoins as a follower
// and is ready again. Nothing runs twice, no try is consumed, the lease's terms never overlap.

let c: FaultCase | undefined;
afterEach(async () => {
  await c?.close();
  c = undefined;
});

const CUT_MS = 10_000;

describe('Pro faults: the leader cut off from PostgreSQL', () => {
  it('a 10 s partition while it holds the lease: the other takes over, the cut one is 503 then rejoins, nothing is lost', async () => {
    c = await startFaultCase({ label: 'dbcut', dbProxies: true, sleepSeconds: 3 });
    const leaderName = await c.leader();
    const otherName = leaderName === 'a' ? 'b' : 'a';
    for (let i = 0; i < 4; i++) expect(await c.trigger(`dbcut-${i}`)).toBe('ok');
    await waitFor(
      'the four runs to have tasks running',
      async () =>
        new Set(readExecutions(c!.marks).map((e) => e.run)).size >= 4 ? true : undefined,
      60_000,
    );
    await c.runsInFlight();
    const proxy = c.dbProxies.get(leaderName)!;
    const faultAt = Date.now();
    proxy.set('blackhole');
    await waitFor(
      'the takeover',
      async () => ((await leadsNow(c!.replicas.get(otherName)!)) ? true : undefined),
      30_000,
    );
    const tookOverAt = Date.now();
    await new Promise((r) => setTimeout(r, Math.max(0, faultAt + CUT_MS - Date.now())));
    const healedAt = Date.now();
    proxy.set('open');
    const cutOff = c.replicas.get(leaderName)!;
    await waitFor(
      'the cut-off replica to be ready again',
      async () => ((await cutOff.readyz().catch(() => null))?.ready ? true : undefined),
      60_000,
    );
    const readyAgainAt = Date.now();
    await c.settle(120_000);
    expect(await leadsNow(cutOff)).toBe(false);
    expect(cutOff.proc.exitCode).toBeNull();
    const truth = readinessVerdict(c.readiness, (s) => {
      if (s.replica === otherName) return 'ready';
      if (s.at < faultAt) return 'ready';
      // the store check answers within 2 s; a probe in flight at the cut may still say 200
      if (s.at > faultAt + 3_000 && s.done < healedAt) return 'not-ready';
      if (s.at > readyAgainAt) return 'ready';
      return 'any';
    });
    const { report } = await c.finish('leader ↔ PostgreSQL partition (10 s)', faultAt, truth);
    expect(report.problems).toEqual([]);
    expect(report.runs).toBe(4);
    expect(report.leaseTerms).toBeGreaterThanOrEqual(2);
    expect(truth).toEqual({ truthful: true, note: expect.any(String) });
    expect(tookOverAt - faultAt).toBeLessThan(15_000);
  }, 300_000);
});
