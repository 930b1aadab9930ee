import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { readExecutions } from '../../support/history-checker.js';
import type { Replica } from '../../support/pro-cluster.js';
import { waitFor } from '../../support/processes.js';
import { leadsNow, readinessVerdict, startFaultCase, type FaultCase } from './fault-case.js';

// A clock jump on the replicas, injected through the control plane's clock port (@leoflow/core's
// Clock; clock-replica.mjs runs `leoflow server` with a clock the test moves over IPC): the
// leader's wall clock leaps 20 s forward — past the lease's ttl (3 s) and the agent-lost
// threshold (8 s) — and the follower's 20 s back, with four runs in flight; later both come
// back. The lease is kept on the database's clock and the elector's deadline on the monotonic
// clock, so the jump must not move leadership: one term throughout. And no attempt may be
// reaped as lost because one replica's clock says its heartbeat is old: no try consumed.

const CLOCK_REPLICA = join(fileURLToPath(new URL('.', import.meta.url)), 'clock-replica.mjs');

let c: FaultCase | undefined;
afterEach(async () => {
  await c?.close();
  c = undefined;
});

function jump(r: Replica, jumpMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`replica ${r.spec.name}: no answer to the jump`)),
      10_000,
    );
    r.proc.once('message', () => {
      clearTimeout(timer);
      resolve();
    });
    r.proc.send({ jumpMs });
  });
}

describe('Pro faults: a clock jump on the replicas', () => {
  it('the leader 20 s ahead, the follower 20 s behind, then back: leadership does not move, no attempt is reaped, nothing runs twice', async () => {
    c = await startFaultCase({
      label: 'clock',
      entry: { a: CLOCK_REPLICA, b: CLOCK_REPLICA },
      sleepSeconds: 3,
    });
    const leaderName = await c.leader();
    const otherName = leaderName === 'a' ? 'b' : 'a';
    const leader = c.replicas.get(leaderName)!;
    const other = c.replicas.get(otherName)!;
    for (let i = 0; i < 4; i++) expect(await c.trigger(`clock-${i}`)).toBe('ok');
    await waitFor(
      'the four runs to have tasks running',
      async () =>
        new Set(readExecutions(c!.marks).map((e) => e.run)).size >= 4 ? true : undefined,
      60_000,
    );
    await c.runsInFlight();
    const faultAt = Date.now();
    await jump(leader, 20_000);
    await jump(other, -20_000);
    // Longer than the agent-lost threshold and several lease renewals.
    await new Promise((r) => setTimeout(r, 12_000));
    expect(await leadsNow(leader)).toBe(true);
    await jump(leader, -20_000);
    await jump(other, 20_000);
    await c.settle(120_000);
    expect(await leadsNow(leader)).toBe(true);
    const truth = readinessVerdict(c.readiness, () => 'ready');
    const { report } = await c.finish('clock jump ±20 s on the replicas', faultAt, truth);
    expect(report.problems).toEqual([]);
    expect(report.runs).toBe(4);
    expect(report.leaseTerms).toBe(1);
    expect(truth).toEqual({ truthful: true, note: expect.any(String) });
  }, 300_000);
});
