import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { RunnerRecord } from '../../src/store/directory-types.js';
import { openStore } from '../../src/store/index.js';
import {
  directoryOnStore,
  openDirectory,
  type Directory,
} from '../../src/store/kysely-directory.js';
import type { Store } from '../../src/store/store.js';
import type { SealedRef } from '../../src/store/vault-types.js';
import { postgresTestUrl, useFreshPostgresSchema } from '../support/databases.js';
import { forEachDialect } from '../support/dialects.js';

function inbound(over: Partial<RunnerRecord> = {}): RunnerRecord {
  return {
    id: 'rnr_1',
    tenant_id: 'team-a',
    name: 'lin-1',
    kind: 'inbound',
    labels: { gpu: 'a100' },
    capacity: 2,
    ssh: null,
    token_hash: 'a'.repeat(64),
    token_cipher: new Uint8Array([1, 2, 3]),
    token_key_id: 'k1',
    created_by: 'user:x@team-a',
    created_at: 1000,
    ...over,
  };
}

async function emptyDirectory(schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: postgresTestUrl() });
  await c.connect();
  try {
    await c.query(`DELETE FROM "${schema}".tenant_placements`);
    await c.query(`DELETE FROM "${schema}".cells`);
    await c.query(`DELETE FROM "${schema}".runners`);
  } finally {
    await c.end();
  }
}

forEachDialect('directory store', (dialect) => {
  let dir: string;
  let store: Store | undefined;
  let directory: Directory;
  const schema = dialect === 'postgres' ? useFreshPostgresSchema('directory') : () => '';

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'leoflow-dir-'));
    if (dialect === 'sqlite') {
      store = await openStore({ kind: 'sqlite', file: join(dir, 'leoflow.db') });
      await store.migrate();
      directory = await directoryOnStore(store);
    } else {
      // one schema per file (dropped after it), emptied before each test
      directory = await openDirectory({
        kind: 'postgres',
        url: postgresTestUrl(),
        schema: schema(),
      });
    }
    await directory.migrate();
    if (dialect === 'postgres') await emptyDirectory(schema());
    // migrating twice is a no-op (every process migrates at boot)
    await directory.migrate();
  });
  afterEach(async () => {
    await directory.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('finds an inbound runner by its token hash, and nothing by a near-miss hash', async () => {
    expect(await directory.insertRunner(inbound())).toBe(true);
    expect(await directory.runnerByTokenHash('a'.repeat(64))).toEqual({
      id: 'rnr_1',
      tenant_id: 'team-a',
      name: 'lin-1',
      kind: 'inbound',
    });
    expect(await directory.runnerByTokenHash(`${'a'.repeat(63)}b`)).toBeUndefined();
    expect(await directory.runnerById('rnr_1')).toEqual({
      id: 'rnr_1',
      tenant_id: 'team-a',
      name: 'lin-1',
      kind: 'inbound',
    });
  });

  it('round-trips every field, ssh target included', async () => {
    await directory.insertRunner(inbound());
    const ssh: RunnerRecord = inbound({
      id: 'rnr_2',
      name: 'box',
      kind: 'ssh',
      token_hash: null,
      token_cipher: null,
      token_key_id: null,
      ssh: {
        host: 'box.internal',
        port: 2222,
        user: 'ci',
        credential: 'box_key',
        host_key: 'SHA256:x',
      },
    });
    await directory.insertRunner(ssh);
    expect(await directory.getRunner('team-a', 'lin-1')).toEqual(inbound());
    expect(await directory.getRunner('team-a', 'box')).toEqual(ssh);
    expect(
      (await directory.listRunners('team-a', { limit: 10, offset: 0 })).map((r) => r.name),
    ).toEqual(['box', 'lin-1']);
    expect(await directory.listRunners('team-b', { limit: 10, offset: 0 })).toEqual([]);
  });

  it('refuses a second runner of the same name in a tenant, not in another tenant', async () => {
    expect(await directory.insertRunner(inbound())).toBe(true);
    expect(await directory.insertRunner(inbound({ id: 'rnr_9', token_hash: 'c'.repeat(64) }))).toBe(
      false,
    );
    expect(
      await directory.insertRunner(
        inbound({ id: 'rnr_9', tenant_id: 'team-b', token_hash: 'c'.repeat(64) }),
      ),
    ).toBe(true);
  });

  it('an ssh row cannot carry a token hash, an inbound row cannot lack one (CHECK)', async () => {
    await expect(
      directory.insertRunner(inbound({ kind: 'ssh', token_hash: 'd'.repeat(64) })),
    ).rejects.toThrow();
    await expect(
      directory.insertRunner(inbound({ token_hash: null, token_cipher: null })),
    ).rejects.toThrow();
  });

  it('delete removes the hash at once: the old token resolves to nothing', async () => {
    await directory.insertRunner(inbound());
    const gone = await directory.deleteRunner('team-a', 'lin-1');
    expect(gone?.id).toBe('rnr_1');
    expect(await directory.runnerByTokenHash('a'.repeat(64))).toBeUndefined();
    expect(await directory.runnerById('rnr_1')).toBeUndefined();
    expect(await directory.deleteRunner('team-a', 'lin-1')).toBeUndefined();
  });

  it('runner tokens for key rotation: listed and counted only under the given key ids, resealed by compare-and-set', async () => {
    const runner = (n: number, key_id: string, tenant_id = 'team-a') =>
      inbound({
        id: `rnr_${n}`,
        tenant_id,
        name: `lin-${n}`,
        token_hash: String(n).repeat(64).slice(0, 64),
        token_cipher: new Uint8Array([n, n]),
        token_key_id: key_id,
      });
    await directory.insertRunner(runner(1, 'k1'));
    await directory.insertRunner(runner(2, 'k1', 'team-b'));
    await directory.insertRunner(runner(3, 'k2'));
    await directory.insertRunner(runner(4, 'k-other-cell'));
    await directory.insertRunner(
      inbound({
        id: 'rnr_5',
        name: 'box',
        kind: 'ssh',
        token_hash: null,
        token_cipher: null,
        token_key_id: null,
        ssh: { host: 'h', port: 22, user: 'u', credential: 'c', host_key: 'SHA256:x' },
      }),
    );
    const held = ['k2', 'k1'];
    expect(await directory.countRunnerTokensByKeyId(held)).toEqual(
      new Map([
        ['k1', 2],
        ['k2', 1],
      ]),
    );
    expect(await directory.countRunnerTokensByKeyId([])).toEqual(new Map());
    const refs = await directory.listRunnerTokensNotUnderKey('k2', held, 10);
    expect(refs).toEqual([
      {
        kind: 'runner_token',
        tenant_id: 'team-a',
        id: 'rnr_1',
        key_id: 'k1',
        cipher: new Uint8Array([1, 1]),
      },
      {
        kind: 'runner_token',
        tenant_id: 'team-b',
        id: 'rnr_2',
        key_id: 'k1',
        cipher: new Uint8Array([2, 2]),
      },
    ]);
    expect(await directory.listRunnerTokensNotUnderKey('k2', held, 1)).toHaveLength(1);
    expect(await directory.listRunnerTokensNotUnderKey('k2', held, 0)).toEqual([]);
    expect(await directory.listRunnerTokensNotUnderKey('k2', ['k2'], 10)).toEqual([]);

    const [one, two] = refs as [SealedRef, SealedRef];
    const next = new Uint8Array([9, 9, 9]);
    // a changed ciphertext (same key id), a wrong tenant or key id: the CAS misses
    expect(
      await directory.resealRunnerTokenIfUnchanged(
        { ...one, cipher: new Uint8Array([7]) },
        next,
        'k2',
      ),
    ).toBe(false);
    expect(
      await directory.resealRunnerTokenIfUnchanged({ ...one, tenant_id: 'team-b' }, next, 'k2'),
    ).toBe(false);
    expect(await directory.resealRunnerTokenIfUnchanged({ ...one, key_id: 'k2' }, next, 'k3')).toBe(
      false,
    );
    expect(await directory.getRunner('team-a', 'lin-1')).toEqual(runner(1, 'k1'));
    expect(await directory.resealRunnerTokenIfUnchanged(one, next, 'k2')).toBe(true);
    expect(await directory.getRunner('team-a', 'lin-1')).toEqual({
      ...runner(1, 'k1'),
      token_cipher: next,
      token_key_id: 'k2',
    });
    // done once: the same ref no longer matches
    expect(await directory.resealRunnerTokenIfUnchanged(one, next, 'k2')).toBe(false);
    expect(await directory.resealRunnerTokenIfUnchanged(two, next, 'k2')).toBe(true);
    expect(await directory.countRunnerTokensByKeyId(held)).toEqual(new Map([['k2', 3]]));
  });

  it('cells, drain and placements: a placement names a cell, and a move replaces it', async () => {
    const cell = (name: string) => ({
      name,
      url: `http://${name}.internal:8795`,
      state: 'active' as const,
      created_at: 1,
      updated_at: 1,
    });
    expect(await directory.insertCell(cell('one'))).toBe(true);
    expect(await directory.insertCell(cell('one'))).toBe(false);
    await directory.insertCell(cell('two'));
    await directory.placeTenant({ tenant_id: 'team-a', cell: 'one', placed_by: 'x', placed_at: 5 });
    expect((await directory.getPlacement('team-a'))?.cell).toBe('one');
    await directory.placeTenant({ tenant_id: 'team-a', cell: 'two', placed_by: 'y', placed_at: 6 });
    expect(await directory.getPlacement('team-a')).toEqual({
      tenant_id: 'team-a',
      cell: 'two',
      placed_by: 'y',
      placed_at: 6,
    });
    expect(await directory.countPlacementsByCell()).toEqual(new Map([['two', 1]]));
    expect(await directory.getPlacement('team-b')).toBeUndefined();
    expect(await directory.setCellState('one', 'draining', 9)).toBe(true);
    expect((await directory.getCell('one'))?.state).toBe('draining');
    expect(await directory.setCellState('nope', 'draining', 9)).toBe(false);
    // a placement must name a cell that exists
    await expect(
      directory.placeTenant({ tenant_id: 'team-c', cell: 'ghost', placed_by: 'x', placed_at: 1 }),
    ).rejects.toThrow();
  });
});

it('the SQLite directory lives in the store file with its own migration bookkeeping', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'leoflow-dir-'));
  try {
    const file = join(dir, 'leoflow.db');
    const store = await openStore({ kind: 'sqlite', file });
    await store.migrate();
    const directory = await directoryOnStore(store);
    await directory.migrate();
    await directory.insertRunner(inbound());
    // the store's own migrations do not know the directory's
    expect((await store.migrationStatus()).applied.some((m) => m.includes('runners'))).toBe(false);
    await directory.close(); // shared: leaves the store's handle open
    expect((await store.migrationStatus()).pending).toEqual([]);
    await store.close();
    const again = await openDirectory({ kind: 'sqlite', file });
    expect((await again.getRunner('team-a', 'lin-1'))?.id).toBe('rnr_1');
    await again.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
