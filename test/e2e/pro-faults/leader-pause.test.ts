import { afterEach, describe, expect, it } from 'vitest';
import { readExecutions } from '../../support/history-checker.js';
import { waitFor } from '../../support/processes.js';
import {
  LEASE_TTL_MS,
  leadsNow,
  readinessVerdict,
  startFaultCase,
  type FaultCase,
} from './fault-case.js';

// The leader paused (SIGSTOP) past its lease: a process that believes it still leads, the
// most dangerous one. The other replica takes the lease; the paused one resumes (SIGCONT) with
// its old epoch in hand. Its monotonic deadline has passed, so it stops scheduling at once; any
// write it had in flight names the old epoch and the fence in that write's own WHERE refuses it.
// The history checker then finds no task executed twice and no two lease terms overlapping.

let c: FaultCase | undefined;
afterEach(async () => {
  await c?.close();
  c = undefined;
});

describe('Pro faults: the leader paused past its lease', () => {
  it('SIGSTOP past the lease, takeover, SIGCONT: the resumed replica steps down, nothing runs twice, no term overlaps', async () => {
    c = await startFaultCase({ label: 'pause' });
    const leaderName = await c.leader();
    const otherName = leaderName === 'a' ? 'b' : 'a';
    for (let i = 0; i < 4; i++) expect(await c.trigger(`pause-${i}`)).toBe('ok');
    await waitFor(
      'the four runs to have tasks running',
      async () =>
        new Set(readExecutions(c!.marks).map((e) => e.run)).size >= 4 ? true : undefined,
      60_000,
    );
    await c.runsInFlight();
    const leader = c.replicas.get(leaderName)!;
    const other = c.replicas.get(otherName)!;
    const faultAt = Date.now();
    process.kill(leader.proc.pid!, 'SIGSTOP');
    await waitFor('the takeover', async () => ((await leadsNow(other)) ? true : undefined), 30_000);
    const tookOverAt = Date.now();
    // Well past the paused one's term: its deadline and the database's expiry are both behind it.
    await new Promise((r) => setTimeout(r, LEASE_TTL_MS));
    const resumedAt = Date.now();
    process.kill(leader.proc.pid!, 'SIGCONT');
    // It steps down: never leads again while the other holds the lease.
    await waitFor(
      'the resumed replica to answer /readyz',
      async () => ((await leader.readyz().catch(() => null)) ? true : undefined),
      15_000,
    );
    const resumedLeads: boolean[] = [];
    for (let i = 0; i < 8; i++) {
      resumedLeads.push(await leadsNow(leader));
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(resumedLeads.every((l) => !l)).toBe(true);
    expect(await leadsNow(other)).toBe(true);
    await c.settle(120_000);
    expect(leader.output()).toMatch(
      /scheduler lease not renewed before its deadline: no longer scheduling|scheduler lease lost to another holder/,
    );
    // The paused replica cannot answer while stopped ('down'); the other is ready once it leads
    // (a replica without the lease is ready too, so it stays ready throughout).
    const truth = readinessVerdict(c.readiness, (s) =>
      s.replica === otherName
        ? 'ready'
        : s.at < faultAt
          ? 'ready'
          : s.at < resumedAt + 2_000
            ? 'any'
            : 'ready',
    );
    const { report, figures } = await c.finish(
      'leader SIGSTOP past its lease, SIGCONT',
      faultAt,
      truth,
    );
    expect(report.problems).toEqual([]);
    expect(report.runs).toBe(4);
    expect(report.leaseTerms).toBeGreaterThanOrEqual(2);
    expect(figures.duplicateOrOverlapping).toBe(0);
    expect(truth).toEqual({ truthful: true, note: expect.any(String) });
    expect(tookOverAt - faultAt).toBeLessThan(15_000);
  }, 300_000);
});
