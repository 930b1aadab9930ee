import { describe, expect, it } from 'vitest';
import type { LeaseHolder } from '../../../src/scheduler/leadership/lease-store.js';
import { checkReadiness, type ReadinessDeps } from '../../../src/api/probes/readiness.js';

const TAKEOVER = 20_000;

function deps(over: Partial<ReadinessDeps> = {}): ReadinessDeps {
  return {
    migrationStatus: () => Promise.resolve({ pending: [] }),
    leaseHolder: () => Promise.resolve<LeaseHolder>({ holder: 'b', epoch: 3, remainingMs: 9_000 }),
    leading: () => false,
    leaderGates: true,
    takeoverMs: TAKEOVER,
    draining: () => false,
    checkTimeoutMs: 50,
    ...over,
  };
}

const failing = async (d: ReadinessDeps) =>
  (await checkReadiness(d)).checks.filter((c) => !c.ok).map((c) => c.name);

describe('/readyz', () => {
  it('is ready when serving, the store answers with no pending migration, and another replica leads', async () => {
    const r = await checkReadiness(deps());
    expect(r.ready).toBe(true);
    expect(r.checks.find((c) => c.name === 'leader')?.detail).toBe('another replica (epoch 3)');
  });

  it('a replica that leads is ready without reading the lease', async () => {
    const r = await checkReadiness(
      deps({ leading: () => true, leaseHolder: () => Promise.reject(new Error('not asked')) }),
    );
    expect(r.ready).toBe(true);
  });

  it('draining is not ready', async () => {
    const d = deps({ draining: () => true });
    expect((await checkReadiness(d)).ready).toBe(false);
    expect(await failing(d)).toEqual(['draining']);
  });

  it('an unreachable store is not ready, and neither is a store that does not answer in time', async () => {
    const broken = deps({ migrationStatus: () => Promise.reject(new Error('ECONNREFUSED')) });
    expect((await checkReadiness(broken)).ready).toBe(false);
    expect(await failing(broken)).toEqual(['store', 'leader']);
    const hung = deps({ migrationStatus: () => new Promise(() => undefined) });
    const r = await checkReadiness(hung);
    expect(r.ready).toBe(false);
    expect(r.checks.find((c) => c.name === 'store')?.detail).toMatch(/no answer within 50 ms/);
  });

  it('a schema with migrations not yet applied is not ready, and names them', async () => {
    const d = deps({ migrationStatus: () => Promise.resolve({ pending: ['0009_x'] }) });
    const r = await checkReadiness(d);
    expect(r.ready).toBe(false);
    expect(r.checks.find((c) => c.name === 'schema')?.detail).toContain('0009_x');
  });

  it('a schema newer than this build is reported but does not gate (a rolling upgrade keeps old replicas serving)', async () => {
    const d = deps({
      migrationStatus: () => Promise.resolve({ pending: [], unknown: ['0099_x'] }),
    });
    const r = await checkReadiness(d);
    expect(r.ready).toBe(true);
    expect(r.checks.find((c) => c.name === 'schema')?.detail).toMatch(
      /newer than this build \(0099_x\)/,
    );
  });

  it('no leader ever, or none for longer than a takeover takes, is not ready for a scheduling replica', async () => {
    expect(
      (await checkReadiness(deps({ leaseHolder: () => Promise.resolve(undefined) }))).ready,
    ).toBe(false);
    const lapsed = (ms: number) =>
      deps({ leaseHolder: () => Promise.resolve({ holder: 'b', epoch: 3, remainingMs: -ms }) });
    // A takeover in progress does not flap every replica's readiness...
    expect((await checkReadiness(lapsed(TAKEOVER))).ready).toBe(true);
    // ...but a lease lapsed for longer than any takeover takes means no scheduler is running.
    expect((await checkReadiness(lapsed(TAKEOVER + 1))).ready).toBe(false);
  });

  it('an api replica stays ready without a leader (the API does not need one); the check is reported', async () => {
    const d = deps({ leaderGates: false, leaseHolder: () => Promise.resolve(undefined) });
    const r = await checkReadiness(d);
    expect(r.ready).toBe(true);
    expect(r.checks.find((c) => c.name === 'leader')).toMatchObject({ ok: false, gating: false });
  });

  it('Lite has no lease: its one process is the scheduler', async () => {
    const r = await checkReadiness(deps({ leaseHolder: null, leaderGates: false }));
    expect(r.ready).toBe(true);
    expect(r.checks.find((c) => c.name === 'leader')?.detail).toBe('this process');
  });
});
