import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { pino } from 'pino';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { Leadership } from '../../../src/scheduler/leadership/leadership.js';
import { LeaseElector } from '../../../src/scheduler/leadership/lease-elector.js';
import {
  PostgresLeaseStore,
  type LeaseStore,
} from '../../../src/scheduler/leadership/lease-store.js';
import { openStore } from '../../../src/store/index.js';
import { leaderFenceHolds } from '../../../src/store/kysely/leader-fence.js';
import type { KyselyStore } from '../../../src/store/kysely-store.js';
import type { LeaderFence } from '../../../src/store/ports/leader-fence.js';
import type { NewRun } from '../../../src/store/ports/runs.js';
import { postgresTestUrl } from '../../support/databases.js';
import { forPostgres } from '../../support/dialects.js';
import { createHarness, spec, T0, task } from '../../support/harness.js';

// The database's clock is real, so the lease is short; the margin is generous because this
// machine's two cores are shared and a test process may stall for a few hundred ms.
const TTL = 1_500;
const RENEW = 250;
const MARGIN = 500;
const silent = pino({ level: 'silent' });

/** Replicas' stores on one fresh schema, as several `leoflow server` processes would open. */
let schema: string;
let opened: KyselyStore[] = [];
let electors: LeaseElector[] = [];

beforeEach(() => {
  schema = `lf_test_lease_${process.pid}_${randomBytes(4).toString('hex')}`;
});

afterEach(async () => {
  for (const e of electors) await e.stop();
  for (const s of opened) await s.close();
  electors = [];
  opened = [];
  const c = new pg.Client({ connectionString: postgresTestUrl() });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await c.end();
});

async function replica(): Promise<KyselyStore> {
  const store = (await openStore({
    kind: 'postgres',
    url: postgresTestUrl(),
    schema,
  })) as KyselyStore;
  await store.migrate();
  opened.push(store);
  return store;
}

function elect(leases: LeaseStore): LeaseElector {
  const e = new LeaseElector({
    leases,
    holder: randomUUID(),
    ttlMs: TTL,
    renewIntervalMs: RENEW,
    safetyMarginMs: MARGIN,
    logger: silent,
  });
  electors.push(e);
  e.start();
  return e;
}

/** A lease store whose calls fail while `cut` is set: the leader's side of a partition. */
function partitionable(inner: LeaseStore) {
  const state = { cut: false };
  const fail = () => Promise.reject(new Error('simulated partition: no route to the database'));
  const leases: LeaseStore = {
    acquire: (...a) => (state.cut ? fail() : inner.acquire(...a)),
    renew: (...a) => (state.cut ? fail() : inner.renew(...a)),
    release: (...a) => (state.cut ? fail() : inner.release(...a)),
    current: (...a) => (state.cut ? fail() : inner.current(...a)),
  };
  return { leases, state };
}

async function until<T>(what: string, probe: () => T | undefined | null, withinMs = 10_000) {
  const started = performance.now();
  for (;;) {
    const v = probe();
    if (v !== undefined && v !== null) return v;
    if (performance.now() - started > withinMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The lease row and the database's clock, read in one statement. */
async function leaseRow(store: KyselyStore) {
  const { rows } = await sql<{
    holder: string;
    epoch: number;
    expires_at: number;
    renewed_at: number;
    db_now: number;
  }>`select holder, epoch, expires_at, renewed_at, (extract(epoch from clock_timestamp()) * 1000)::bigint as db_now from scheduler_lease where name = 'scheduler'`.execute(
    store.kysely,
  );
  const row = rows[0];
  if (row === undefined) throw new Error('no lease row');
  return {
    holder: row.holder,
    epoch: Number(row.epoch),
    expires_at: Number(row.expires_at),
    renewed_at: Number(row.renewed_at),
    db_now: Number(row.db_now),
  };
}

function leaderOf(es: LeaseElector[]) {
  const leading = es.filter((e) => e.fence() !== null);
  return leading.length === 1 ? leading[0] : undefined;
}

function scheduledRun(run_id: string): NewRun {
  return {
    tenant_id: 'default',
    dag_id: 'd',
    run_id,
    run_type: 'scheduled',
    dag_version: 1,
    logical_date: T0,
    data_interval_start: T0 - 3600_000,
    data_interval_end: T0,
    conf: {},
    tasks: [{ task_id: 'a', max_tries: 1 }],
    now: T0,
  };
}

async function seedDag(store: KyselyStore) {
  await store.ensureTenant('default', 'default', T0);
  await store.putDagVersion('default', spec({ dag_id: 'd', tasks: [task('a')] }), 'h', T0);
}

forPostgres('scheduler leadership', () => {
  it('two electors on one database: exactly one leads, and keeps leading', async () => {
    const [a, b] = [await replica(), await replica()];
    const es = [elect(new PostgresLeaseStore(a.kysely)), elect(new PostgresLeaseStore(b.kysely))];
    const leader = await until('a leader', () => leaderOf(es));
    // Over several ttls, never two leaders and never a change of leader or epoch.
    const epoch = leader.fence()!.epoch;
    const deadline = performance.now() + 2 * TTL;
    while (performance.now() < deadline) {
      expect(es.filter((e) => e.fence() !== null)).toEqual([leader]);
      expect(leader.fence()?.epoch).toBe(epoch);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect((await leaseRow(a)).epoch).toBe(epoch);
  });

  it('a leader cut off from the database stops before its lease expires there; the other takes over after expiry with a higher epoch', async () => {
    const [a, b] = [await replica(), await replica()];
    const cut = partitionable(new PostgresLeaseStore(a.kysely));
    const first = elect(cut.leases);
    const firstEpoch = (await until('the first leader', () => first.fence())).epoch;
    const second = elect(new PostgresLeaseStore(b.kysely));

    cut.state.cut = true;
    await until('the cut-off leader to stop', () => (first.fence() === null ? true : null));
    // Read at once, over a connection the partition does not cut: still live in the database.
    const atStop = await leaseRow(b);
    expect(atStop.epoch).toBe(firstEpoch);
    expect(atStop.expires_at - atStop.db_now).toBeGreaterThan(0);
    expect(second.fence()).toBeNull();

    const secondFence = await until('the takeover', () => second.fence());
    expect(secondFence.epoch).toBeGreaterThan(firstEpoch);
    const after = await leaseRow(b);
    // Taken over no earlier than the old grant expired, by the database's clock.
    expect(after.renewed_at).toBeGreaterThanOrEqual(atStop.expires_at);
    expect(first.fence()).toBeNull();
  });

  it('fencing, not timing: a deposed leader that still writes with its old epoch changes nothing', async () => {
    const [a, b] = [await replica(), await replica()];
    await seedDag(a);
    const run = await a.createRun({ ...scheduledRun('manual__seed'), run_type: 'manual' });
    const ti = (await a.listTaskInstances(run!.id))[0]!;
    await a.updateTaskInstance(ti.id, { states: ['none'] }, { state: 'scheduled' }, T0);

    const leasesA = new PostgresLeaseStore(a.kysely);
    const leasesB = new PostgresLeaseStore(b.kysely);
    const old = await leasesA.acquire('scheduler', 'replica-a', TTL);
    const oldFence: LeaderFence = { kind: 'lease', name: 'scheduler', epoch: old!.epoch };
    // Expired, not yet taken over: the old epoch is still current but its time is up.
    await new Promise((r) => setTimeout(r, TTL + 100));
    expect(await a.createRun(scheduledRun('scheduled__late1'), oldFence)).toBeUndefined();
    // Taken over: a new epoch, and the old holder's writes are refused however they are timed.
    const taken = await leasesB.acquire('scheduler', 'replica-b', 60_000);
    expect(taken!.epoch).toBe(old!.epoch + 1);
    const claim = (leader: LeaderFence) =>
      a.updateTaskInstance(
        ti.id,
        { states: ['scheduled'], try_number: 1, dispatch_gen: 0, leader },
        { state: 'queued', queued_at: T0, dispatch_gen: 1 },
        T0,
      );
    expect(await a.createRun(scheduledRun('scheduled__late2'), oldFence)).toBeUndefined();
    expect(await claim(oldFence)).toBe(false);
    expect(await a.getRun('default', 'd', 'scheduled__late1')).toBeUndefined();
    expect(await a.getRun('default', 'd', 'scheduled__late2')).toBeUndefined();
    expect((await a.getTaskInstanceById(ti.id))?.state).toBe('scheduled');
    // The dag's planning cursor did not move either: the whole transaction was refused.
    expect((await a.listSchedulableDags())[0]?.last_scheduled_logical_date ?? null).toBeNull();

    // The current epoch's writes go through.
    const current: LeaderFence = { kind: 'lease', name: 'scheduler', epoch: taken!.epoch };
    expect(await a.createRun(scheduledRun('scheduled__now'), current)).toBeDefined();
    expect(await claim(current)).toBe(true);
  });

  it('a takeover waits for a fenced write in flight: no old-epoch write commits after the new epoch began', async () => {
    const [a, b] = [await replica(), await replica()];
    const old = await new PostgresLeaseStore(a.kysely).acquire('scheduler', 'old', 300);
    const fence: LeaderFence = { kind: 'lease', name: 'scheduler', epoch: old!.epoch };
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let checked!: () => void;
    const fenceChecked = new Promise<void>((r) => (checked = r));
    // A fenced transaction that passed its check just before the lease ran out, and is slow.
    const write = a.kysely.transaction().execute(async (tx) => {
      const { rows } = await sql<{
        held: boolean;
      }>`select ${leaderFenceHolds('postgres', fence)} as held`.execute(tx);
      expect(rows[0]?.held).toBe(true);
      checked();
      await held;
    });
    await fenceChecked;
    await new Promise((r) => setTimeout(r, 400));
    let settled = false;
    const takeover = new PostgresLeaseStore(b.kysely)
      .acquire('scheduler', 'new', TTL)
      .finally(() => (settled = true));
    try {
      await new Promise((r) => setTimeout(r, 300));
      expect(settled).toBe(false);
    } finally {
      release();
      await write;
    }
    expect((await takeover)?.epoch).toBe(old!.epoch + 1);
  });

  it("a deposed leader's scheduler creates no run and claims nothing, even when it believes it leads", async () => {
    const h = await createHarness({ dialect: 'postgres', leadership: lying() });
    try {
      const store = h.store as KyselyStore;
      await store.putDagVersion(
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
      await h.runs.trigger('default', 'hourly', {});
      const leases = new PostgresLeaseStore(store.kysely);
      const first = await leases.acquire('scheduler', 'deposed', 60_000);
      await leases.release('scheduler', 'deposed', first!.epoch);
      const current = await leases.acquire('scheduler', 'current', 60_000);
      believed.fence = { kind: 'lease', name: 'scheduler', epoch: first!.epoch };

      await h.scheduler.tick();
      await h.scheduler.tick();
      expect(h.executor.take()).toEqual([]);
      const runs = await store.listRuns('default', { dag_id: 'hourly' }, { limit: 10, offset: 0 });
      expect(runs.map((r) => r.run_type)).toEqual(['manual']);

      // The same scheduler with the current epoch does both.
      believed.fence = { kind: 'lease', name: 'scheduler', epoch: current!.epoch };
      await h.scheduler.tick();
      await h.scheduler.tick();
      expect(h.executor.take().length).toBeGreaterThan(0);
      const after = await store.listRuns('default', { dag_id: 'hourly' }, { limit: 10, offset: 0 });
      expect(after.some((r) => r.run_type === 'scheduled')).toBe(true);
    } finally {
      await h.close();
    }
  });

  it('a deposed leader moves nothing: no retry promoted, no downstream scheduled, no run started or finished, no attempt reaped, no orphan reset', async () => {
    const h = await createHarness({ dialect: 'postgres', leadership: lying() });
    try {
      const store = h.store as KyselyStore;
      const leases = new PostgresLeaseStore(store.kysely);
      const deposed = await leases.acquire('scheduler', 'deposed', 60_000);
      const deposedFence: LeaderFence = { kind: 'lease', name: 'scheduler', epoch: deposed!.epoch };
      believed.fence = deposedFence;
      const dag = (dag_id: string, tasks: ReturnType<typeof task>[]) =>
        store.putDagVersion('default', spec({ dag_id, tasks }), `h-${dag_id}`, T0);
      await dag('chain', [task('a'), task('b', { depends_on: ['a'] })]);
      await dag('retry', [task('r', { retries: 1 })]);
      await dag('lost', [task('x')]);
      await dag('done', [task('y')]);
      await dag('fresh', [task('z')]);
      const runs = {
        chain: await h.runs.trigger('default', 'chain', {}),
        retry: await h.runs.trigger('default', 'retry', {}),
        lost: await h.runs.trigger('default', 'lost', {}),
        done: await h.runs.trigger('default', 'done', {}),
      };
      // While it still leads: every run starts and every root is claimed.
      await h.scheduler.tick();
      expect(h.executor.take()).toHaveLength(4);
      const ti = async (run: { id: string }, task_id: string) =>
        (await store.listTaskInstances(run.id)).find((t) => t.task_id === task_id)!;
      const now = h.clock.now();
      const move = async (run: { id: string }, task_id: string, patch: object) => {
        const row = await ti(run, task_id);
        expect(await store.updateTaskInstance(row.id, { states: [row.state] }, patch, now)).toBe(
          true,
        );
      };
      await move(runs.chain, 'a', { state: 'success', ended_at: now });
      await move(runs.retry, 'r', { state: 'up_for_retry', retry_at: now });
      await move(runs.lost, 'x', { state: 'running', started_at: now, last_heartbeat_at: now });
      await move(runs.done, 'y', { state: 'success', ended_at: now });
      // An orphan: a claim made before this scheduler's term began, no agent recorded.
      const fresh = await h.runs.trigger('default', 'fresh', {});
      const orphanRun = await h.runs.trigger('default', 'fresh', { runId: 'orphaned' });
      await store.setRunState(orphanRun.id, ['queued'], 'running', { started_at: now });
      await move(orphanRun, 'z', { state: 'queued', queued_at: now - 1 });

      // Another replica takes over; this one still believes its old epoch holds.
      await leases.release('scheduler', 'deposed', deposed!.epoch);
      const current = await leases.acquire('scheduler', 'current', 60_000);
      h.clock.advance(100_000); // past agent-lost (90 s) and past the retry's time
      const snapshot = async () => ({
        b: (await ti(runs.chain, 'b')).state,
        r: (await ti(runs.retry, 'r')).state,
        x: (await ti(runs.lost, 'x')).state,
        done: (await store.getRunById(runs.done.id))?.state,
        fresh: (await store.getRunById(fresh.id))?.state,
        orphan: `${(await ti(orphanRun, 'z')).state}/gen ${(await ti(orphanRun, 'z')).dispatch_gen}`,
      });
      const before = await snapshot();
      expect(before).toEqual({
        b: 'none',
        r: 'up_for_retry',
        x: 'running',
        done: 'running',
        fresh: 'queued',
        orphan: 'queued/gen 0',
      });
      const restarted = h.restart();
      for (const s of [h.scheduler, restarted]) {
        await s.tick();
        await s.tick();
      }
      expect(await snapshot()).toEqual(before);
      expect(h.executor.take()).toEqual([]);

      // The same schedulers with the current epoch make every one of those moves.
      believed.fence = { kind: 'lease', name: 'scheduler', epoch: current!.epoch };
      await restarted.tick();
      await restarted.tick();
      const after = await snapshot();
      expect(after.b).not.toBe('none');
      expect(after.r).not.toBe('up_for_retry');
      expect(after.x).toBe('failed');
      expect(after.done).toBe('success');
      expect(after.fresh).toBe('running');
      // Reset (try kept) and claimed again by the current leader: a new dispatch generation.
      expect(after.orphan).toBe('queued/gen 1');
    } finally {
      await h.close();
    }
  });

  it("a new leader adopts the claims its predecessor made, even ones made after the new leader's process started", async () => {
    const h = await createHarness({ dialect: 'postgres', leadership: lying() });
    try {
      const store = h.store as KyselyStore;
      // The standby is built (its process starts) before the old leader makes its claim.
      const standby = h.restart();
      await store.putDagVersion('default', spec({ dag_id: 'd', tasks: [task('a')] }), 'h1', T0);
      await h.runs.trigger('default', 'd', {});
      const leases = new PostgresLeaseStore(store.kysely);
      const old = await leases.acquire('scheduler', 'old', 60_000);
      believed.fence = { kind: 'lease', name: 'scheduler', epoch: old!.epoch };
      h.clock.advance(60_000);
      await h.scheduler.tick();
      expect(h.executor.take().map((l) => l.identity.dispatch_gen)).toEqual([1]);

      // The old leader dies before its agent registers; the standby is elected.
      await leases.release('scheduler', 'old', old!.epoch);
      const next = await leases.acquire('scheduler', 'standby', 60_000);
      believed.fence = { kind: 'lease', name: 'scheduler', epoch: next!.epoch };
      h.clock.advance(60_000);
      await standby.tick();
      // Reset without costing a try, and dispatched again under a new generation.
      const again = h.executor.take();
      expect(again.map((l) => [l.identity.try_number, l.identity.dispatch_gen])).toEqual([[1, 2]]);
    } finally {
      await h.close();
    }
  });

  it('a leader killed without releasing is replaced within ttl + renew interval', async () => {
    const [a, b] = [await replica(), await replica()];
    const first = elect(new PostgresLeaseStore(a.kysely));
    const firstEpoch = (await until('the first leader', () => first.fence())).epoch;
    const second = elect(new PostgresLeaseStore(b.kysely));
    await new Promise((r) => setTimeout(r, 2 * RENEW));
    // The replica dies: its connections close, nothing is released.
    await a.close();
    const killedAt = performance.now();
    const took = await until('the takeover', () => second.fence());
    const elapsed = performance.now() - killedAt;
    expect(took.epoch).toBe(firstEpoch + 1);
    // Slack for a stalled test process on a shared machine.
    expect(elapsed).toBeLessThan(TTL + RENEW + 400);
  });

  it('a leader that stops gracefully hands over at once, not after the ttl', async () => {
    const [a, b] = [await replica(), await replica()];
    const first = elect(new PostgresLeaseStore(a.kysely));
    const firstEpoch = (await until('the first leader', () => first.fence())).epoch;
    const second = elect(new PostgresLeaseStore(b.kysely));
    await new Promise((r) => setTimeout(r, 2 * RENEW));
    expect(second.fence()).toBeNull();
    const stoppedAt = performance.now();
    await first.stop();
    const took = await until('the takeover', () => second.fence());
    const elapsed = performance.now() - stoppedAt;
    expect(took.epoch).toBe(firstEpoch + 1);
    // One acquire interval, not a ttl.
    expect(elapsed).toBeLessThan(RENEW + 300);
  });
});

/** A Leadership that answers whatever the test believes, right or wrong. */
const believed: { fence: LeaderFence | null } = { fence: null };
function lying(): Leadership {
  return { fence: () => believed.fence, onChange: () => undefined };
}
