/**
 * Issue 39: the history a fault test reads. Every term of the scheduler lease is recorded by the
 * database itself (a trigger, in the acquire's, renewal's or release's own transaction), and each
 * Pro replica records the agent URLs it hands its agents, warning when another disagrees.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { recordReplica } from '../../../src/boot/replica-registry.js';
import { Lifecycle } from '../../../src/boot/lifecycle.js';
import { defaultServerConfig } from '../../../src/config/server-config.js';
import { DEFAULT_LEASE_TIMINGS } from '../../../src/config/pro-config.js';
import { PostgresLeaseStore } from '../../../src/scheduler/leadership/lease-store.js';
import { openStore } from '../../../src/store/index.js';
import type { KyselyStore } from '../../../src/store/kysely-store.js';
import { postgresTestUrl } from '../../support/databases.js';
import { forPostgres } from '../../support/dialects.js';

let schema: string;
let opened: KyselyStore[] = [];

beforeEach(() => {
  schema = `lf_test_terms_${process.pid}_${randomBytes(4).toString('hex')}`;
});

afterEach(async () => {
  for (const s of opened) await s.close();
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

interface Term {
  epoch: number;
  holder: string;
  granted_at: number;
  expires_at: number;
}

async function terms(store: KyselyStore): Promise<Term[]> {
  const { rows } =
    await sql<Term>`select epoch, holder, granted_at, expires_at from scheduler_lease_terms where name = 'scheduler' order by epoch`.execute(
      store.kysely,
    );
  return rows.map((r) => ({
    epoch: Number(r.epoch),
    holder: r.holder,
    granted_at: Number(r.granted_at),
    expires_at: Number(r.expires_at),
  }));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

forPostgres('lease terms and replica records', () => {
  it('records each term once, with its last expiry; a takeover begins no earlier than the previous term ended; a holder re-acquiring its own live lease closes its old term at that moment', async () => {
    const a = new PostgresLeaseStore((await replica()).kysely);
    const b = new PostgresLeaseStore((await replica()).kysely);
    const store = opened[0]!;
    const [ha, hb] = [randomUUID(), randomUUID()];
    expect((await a.acquire('scheduler', ha, 300))?.epoch).toBe(1);
    const renewed = await a.renew('scheduler', ha, 1, 300);
    expect(await b.acquire('scheduler', hb, 300)).toBeUndefined();
    // A's lease runs out; B takes over
    await sleep(350);
    expect((await b.acquire('scheduler', hb, 10_000))?.epoch).toBe(2);
    // B, before its expiry, acquires again (a leader whose own deadline passed first)
    const again = await b.acquire('scheduler', hb, 10_000);
    expect(again?.epoch).toBe(3);
    await b.release('scheduler', hb, 3);
    const t = await terms(store);
    expect(t.map((x) => [x.epoch, x.holder])).toEqual([
      [1, ha],
      [2, hb],
      [3, hb],
    ]);
    expect(t[0]!.expires_at).toBe(renewed!.expiresAtDbMs);
    for (let i = 1; i < t.length; i++) {
      expect(t[i]!.granted_at).toBeGreaterThanOrEqual(t[i - 1]!.expires_at);
    }
    // epoch 2 ended when epoch 3 began, not at its 10 s grant; the release ended epoch 3
    expect(t[1]!.expires_at).toBeLessThan(t[1]!.granted_at + 5_000);
    expect(t[2]!.expires_at).toBeLessThan(t[2]!.granted_at + 5_000);
  });

  it('a replica advertising other agent URLs than a live one warns at start, naming both sets; the same set in another order does not; a stopped replica leaves no row', async () => {
    const store = await replica();
    const cfg = defaultServerConfig('/tmp/unused');
    cfg.pro = {
      role: 'all',
      lease: DEFAULT_LEASE_TIMINGS,
      drainGraceMs: 1_000,
      keysDir: '/tmp/unused',
    };
    const lines: string[] = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    const start = async (instance: string, urls: string[]) => {
      const life = new Lifecycle(() => undefined);
      await recordReplica(cfg, { store, logger, life, instance, role: 'all', agentUrls: urls });
      return life;
    };
    const first = await start('a', ['http://127.0.0.1:8793']);
    expect(lines).toEqual([]);
    await start('b', ['http://127.0.0.1:8794']);
    expect(lines).toHaveLength(1);
    const warning = JSON.parse(lines[0]!) as { msg: string; others: unknown };
    expect(warning.msg).toMatch(
      /^replicas advertise different agent URLs: this one gives agents http:\/\/127\.0\.0\.1:8794; a gives http:\/\/127\.0\.0\.1:8793\. .*--agent-advertise-url/,
    );
    // the list the user's setup gives both, each with its own URL first: one set, no warning
    lines.length = 0;
    await first.close();
    const both = ['http://127.0.0.1:8793', 'http://127.0.0.1:8794'];
    const c = await start('c', both);
    await start('d', [...both].reverse());
    // c and d each differ from b alone (b still runs), never from each other
    const msgs = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(msgs).toHaveLength(2);
    expect(msgs[1]).toMatch(
      /this one gives agents http:\/\/127\.0\.0\.1:8794,http:\/\/127\.0\.0\.1:8793; b gives http:\/\/127\.0\.0\.1:8794\. /,
    );
    expect(msgs.some((m) => /[cd] gives/.test(m))).toBe(false);
    await c.close();
    const { rows } = await sql<{
      instance: string;
    }>`select instance from control_plane_replicas order by instance`.execute(store.kysely);
    expect(rows.map((r) => r.instance)).toEqual(['b', 'd']);
  });
});
