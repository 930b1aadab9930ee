// The agent secret path's reads: Store.getRunSpecRef on both dialects, and on SQLite files the
// read-only second connection (sqlite-hot-reads.ts) that serves getAttemptLiveness,
// getRunSpecRef and getConnectionsByIds — same answers as the Kysely path, committed data only,
// fresh on every call.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/index.js';
import { KyselyStore } from '../../src/store/kysely-store.js';
import type { ConnectionRecord } from '../../src/store/vault-types.js';
import { postgresTestUrl, useFreshPostgresSchema } from '../support/databases.js';
import { forEachDialect } from '../support/dialects.js';
import { minimalSpec } from '../support/spec-builders.js';

const T0 = 1_700_000_000_000;
const dir = mkdtempSync(join(tmpdir(), 'leoflow-hot-reads-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let seq = 0;

async function runWithTask(store: Store, tenant_id: string, dag_id: string) {
  await store.ensureTenant(tenant_id, tenant_id, T0);
  await store.putDagVersion(tenant_id, minimalSpec(dag_id), 'h1', T0);
  await store.putDagVersion(tenant_id, { ...minimalSpec(dag_id), description: 'v2' }, 'h2', T0);
  const run = await store.createRun({
    tenant_id,
    dag_id,
    run_id: `manual__${seq++}`,
    run_type: 'manual',
    dag_version: 2,
    logical_date: null,
    data_interval_start: null,
    data_interval_end: null,
    conf: { big: 'x'.repeat(100) },
    tasks: [{ task_id: 'extract', max_tries: 1 }],
    now: T0,
  });
  if (run === undefined) throw new Error('run not created');
  const ti = (await store.listTaskInstances(run.id))[0];
  if (ti === undefined) throw new Error('no task instance');
  return { run, ti };
}

function conn(tenant_id: string, conn_id: string, sealed: boolean): ConnectionRecord {
  return {
    tenant_id,
    conn_id,
    conn_type: 'postgres',
    host: `${conn_id}.example.com`,
    login: sealed ? 'svc' : null,
    schema: null,
    port: sealed ? 5432 : null,
    description: `d ${conn_id}`,
    secret_cipher: sealed ? Uint8Array.from([1, 2, 3, conn_id.length]) : null,
    key_id: sealed ? 'k1' : null,
    dag_grants: null,
    created_at: T0,
    updated_at: T0 + 1,
  };
}

forEachDialect('Store.getRunSpecRef', (dialect) => {
  const schema = dialect === 'postgres' ? useFreshPostgresSchema('hot_reads') : undefined;
  let store: Store;
  beforeEach(async () => {
    store =
      dialect === 'postgres'
        ? await openStore({ kind: 'postgres', url: postgresTestUrl(), schema: schema!() })
        : await openStore({ kind: 'sqlite', file: join(dir, `ref-${seq++}.db`) });
    await store.migrate();
  });
  afterEach(() => store.close());

  it('is the run’s tenant, DAG and version; undefined for an unknown run', async () => {
    const { run } = await runWithTask(store, 't1', 'ref_dag');
    expect(await store.getRunSpecRef(run.id)).toEqual({
      tenant_id: 't1',
      dag_id: 'ref_dag',
      dag_version: 2,
    });
    const full = await store.getRunById(run.id);
    expect(await store.getRunSpecRef(run.id)).toEqual({
      tenant_id: full?.tenant_id,
      dag_id: full?.dag_id,
      dag_version: full?.dag_version,
    });
    expect(await store.getRunSpecRef('00000000-0000-4000-8000-000000000000')).toBeUndefined();
  });
});

describe('sqlite hot reads (read-only second connection)', () => {
  let file: string;
  let store: KyselyStore;
  /** The same database through the writer's Kysely connection only: the reference answers. */
  let plain: KyselyStore;

  beforeEach(async () => {
    file = join(dir, `hot-${seq++}.db`);
    store = (await openStore({ kind: 'sqlite', file })) as KyselyStore;
    await store.migrate();
    plain = new KyselyStore(store.kysely, { dialect: 'sqlite' });
  });
  afterEach(() => store.close());

  it('answers exactly as the Kysely path: liveness, run reference, scoped connections', async () => {
    const { run, ti } = await runWithTask(store, 't1', 'eq_dag');
    await store.ensureTenant('t2', 't2', T0);
    const ids = Array.from({ length: 1_203 }, (_, i) => `c_${String(i).padStart(4, '0')}`);
    for (const [i, id] of ids.entries()) {
      await store.putConnection(conn('t1', id, i % 3 !== 0));
      if (i % 100 === 0) await store.putConnection(conn('t2', id, true));
    }

    const lists: string[][] = [
      [],
      ['c_0005'],
      ['c_0009', 'c_0001', 'c_0001', 'missing', 'c_0400'],
      ids.filter((_, i) => i % 50 === 7),
      // past one `in (...)` chunk of 500, with duplicates and names that do not exist
      [...ids, 'nope', ids[3]!, ids[700]!],
      ids.slice(0, 20),
      ids.slice(20, 40),
    ];
    for (const list of lists)
      for (const t of ['t1', 't2', 'none']) {
        const hot = await store.getConnectionsByIds(t, list);
        expect(hot, `${t} × ${list.length}`).toEqual(await plain.getConnectionsByIds(t, list));
        for (const rec of hot) {
          expect(rec.tenant_id).toBe(t);
          expect(list).toContain(rec.conn_id);
          if (rec.secret_cipher !== null) expect(rec.secret_cipher.constructor).toBe(Uint8Array);
        }
      }
    expect(await store.getConnectionsByIds('t1', ids.slice(0, 3))).toEqual(
      ids.slice(0, 3).map((id, i) => conn('t1', id, i % 3 !== 0)),
    );
    // the grants delivery checks come on the hot path too (issue 34)
    await store.setSecretGrants('t1', 'connections', ids[1]!, ['etl_*'], T0 + 2);
    const [granted] = await store.getConnectionsByIds('t1', [ids[1]!]);
    expect(granted?.dag_grants).toEqual(['etl_*']);
    expect(granted).toEqual((await plain.getConnectionsByIds('t1', [ids[1]!]))[0]);

    const states = ['none', 'scheduled', 'queued', 'running', 'success', 'failed'] as const;
    let from: (typeof states)[number] = 'none';
    for (const state of states) {
      if (state !== from)
        expect(await store.updateTaskInstance(ti.id, { states: [from] }, { state }, T0)).toBe(true);
      from = state;
      for (const [task, attempt] of [
        ['extract', 1],
        ['extract', 2],
        ['other', 1],
      ] as const)
        expect(await store.getAttemptLiveness(run.id, task, attempt)).toEqual(
          await plain.getAttemptLiveness(run.id, task, attempt),
        );
    }
    await store.updateTaskInstance(ti.id, { states: ['failed'] }, { state: 'running' }, T0);
    expect(await store.revokeAttemptCredential(ti.id, 1, T0)).toBe(true);
    expect(await store.getAttemptLiveness(run.id, 'extract', 1)).toEqual({
      live: true,
      revoked: true,
    });
    expect(await plain.getAttemptLiveness(run.id, 'extract', 1)).toEqual({
      live: true,
      revoked: true,
    });
    expect(await store.getRunSpecRef(run.id)).toEqual(await plain.getRunSpecRef(run.id));
  });

  it('never sees a write that is not committed; sees it on the very next read once it is', async () => {
    const { run, ti } = await runWithTask(store, 't1', 'tx_dag');
    await store.updateTaskInstance(ti.id, { states: ['none'] }, { state: 'running' }, T0);
    await store.putConnection(conn('t1', 'pg', true));
    const live = () => store.getAttemptLiveness(run.id, 'extract', 1);
    const pg = async () => (await store.getConnectionsByIds('t1', ['pg', 'added']))[0];
    expect(await live()).toEqual({ live: true, revoked: false });

    for (const outcome of ['rollback', 'commit'] as const) {
      // The writer connection, mid-transaction: Kysely holds it until the callback returns, so
      // anything still reading through Kysely would wait; the hot reads do not.
      await store.kysely.connection().execute(async (w) => {
        await sql`begin immediate`.execute(w);
        await sql`update task_instances set state = 'failed', credential_revoked_try = 1 where id = ${ti.id}`.execute(
          w,
        );
        await sql`update connections set host = 'moved.example.com' where conn_id = 'pg'`.execute(
          w,
        );
        await sql`update dag_runs set dag_version = 1 where id = ${run.id}`.execute(w);
        // Uncommitted: every hot read still answers from the last commit.
        expect(await live()).toEqual({ live: true, revoked: false });
        expect((await pg())?.host).toBe('pg.example.com');
        expect((await store.getConnectionsByIds('t1', ['pg', 'added'])).length).toBe(1);
        expect((await store.getRunSpecRef(run.id))?.dag_version).toBe(2);
        await sql.raw(outcome).execute(w);
      });
      if (outcome === 'rollback') {
        expect(await live()).toEqual({ live: true, revoked: false });
        expect((await pg())?.host).toBe('pg.example.com');
      }
    }
    // Committed: the next read of each sees it (nothing is cached, no snapshot lingers).
    expect(await live()).toEqual({ live: false, revoked: true });
    expect((await pg())?.host).toBe('moved.example.com');
    expect((await store.getRunSpecRef(run.id))?.dag_version).toBe(1);

    // And through the Store's own writes, read back at once, alternately.
    for (const state of ['running', 'success', 'running', 'failed'] as const) {
      const prev = (await store.getTaskInstanceById(ti.id))!.state;
      expect(await store.updateTaskInstance(ti.id, { states: [prev] }, { state }, T0)).toBe(true);
      expect((await live()).live).toBe(state === 'running');
    }
  });

  it('on :memory: (no file to share) the same reads go through Kysely', async () => {
    const mem = await openStore({ kind: 'sqlite', file: ':memory:' });
    try {
      await mem.migrate();
      const { run } = await runWithTask(mem, 't1', 'mem_dag');
      expect(await mem.getAttemptLiveness(run.id, 'extract', 1)).toEqual({
        live: false,
        revoked: false,
      });
      expect(await mem.getRunSpecRef(run.id)).toMatchObject({ dag_version: 2 });
    } finally {
      await mem.close();
    }
  });

  it('closes with the store, before the writer, so the WAL is checkpointed away', async () => {
    await runWithTask(store, 't1', 'close_dag');
    await store.getConnectionsByIds('t1', ['a', 'b']);
    expect(existsSync(`${file}-wal`)).toBe(true);
    await store.close();
    expect(existsSync(`${file}-wal`)).toBe(false);
    await expect(store.getAttemptLiveness('x', 'y', 1)).rejects.toThrow();
  });
});
