import { afterEach, describe, expect, it } from 'vitest';
import { readExecutions } from '../../support/history-checker.js';
import { waitFor } from '../../support/processes.js';
import { readinessVerdict, startFaultCase, type FaultCase } from './fault-case.js';

// A partition between the agents and the replica that started them (the leader, which
// dispatches): the agents reach each replica through a TCP proxy the test controls, and the
// leader's is cut (blackholed: connections hang, new ones are never answered) while every run
// has a task running. The replica itself stays up and keeps the lease. Each agent's next call
// times out, moves to the other URL of its list and carries on there — under the token and
// session key it registered with on the leader. The other replica has never seen those agents:
// it reads each attempt's session binding from the store (the credential defaults bind every
// token to its agent's session), so it accepts their heartbeats, logs, XCom and reports. Nothing
// is refused as unbound, no try is consumed, and the history checker finds nothing.

let c: FaultCase | undefined;
afterEach(async () => {
  await c?.close();
  c = undefined;
});

describe('Pro faults: agents cut off from their replica', () => {
  it('the leader unreachable for its agents: they carry on at the other replica, whose session bindings come from the store', async () => {
    c = await startFaultCase({ label: 'agentcut', agentProxies: true, sleepSeconds: 4 });
    const leaderName = await c.leader();
    for (let i = 0; i < 4; i++) expect(await c.trigger(`agentcut-${i}`)).toBe('ok');
    await waitFor(
      'the four runs to have tasks running',
      async () =>
        new Set(
          readExecutions(c!.marks)
            .filter((e) => e.end === null)
            .map((e) => e.run),
        ).size >= 4
          ? true
          : undefined,
      60_000,
    );
    await c.runsInFlight();
    const faultAt = Date.now();
    c.agentProxies.get(leaderName)!.set('blackhole');
    // Longer than the agent-lost threshold (8 s): an agent that could not move would be reaped.
    await new Promise((r) => setTimeout(r, 12_000));
    c.agentProxies.get(leaderName)!.set('open');
    await c.settle(120_000);
    // The leader kept its lease and its HTTP port: every replica stayed ready.
    const truth = readinessVerdict(c.readiness, () => 'ready');
    const { report } = await c.finish('agent ↔ leader partition (12 s)', faultAt, truth);
    expect(report.problems).toEqual([]);
    expect(report.runs).toBe(4);
    expect(truth).toEqual({ truthful: true, note: expect.any(String) });
    // Attempts that registered before the cut and finished after it: their last reports went to
    // the other replica (the leader's agent port was unreachable through the list).
    const across = readExecutions(c.marks).filter(
      (e) => e.start < faultAt && e.end !== null && e.end > faultAt + 1_000,
    );
    expect(across.length).toBeGreaterThanOrEqual(1);
    const { rows } = await c.db.query<{ n: string }>(
      `select count(*) as n from audit_log where action = 'credential.unbound_use'`,
    );
    expect(Number(rows[0]!.n)).toBe(0);
  }, 300_000);
});
