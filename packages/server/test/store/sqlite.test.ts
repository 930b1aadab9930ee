import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import type { KyselyStore } from '../../src/store/kysely-store.js';
import { registerStoreSuite } from './store.suite.js';
import { registerUpgradeCase } from './upgrade.case.js';
import { minimalSpec } from '../support/spec-builders.js';

// A real file, not :memory:, so WAL, file permissions and reopen behave as in Lite.
const dir = mkdtempSync(join(tmpdir(), 'leoflow-store-'));
const file = join(dir, 'nested', 'leoflow.db');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sqlite storage suite', () => {
  registerStoreSuite({ open: () => openStore({ kind: 'sqlite', file }) });
});

describe('sqlite specifics', () => {
  registerUpgradeCase(() => openStore({ kind: 'sqlite', file: join(dir, 'upgrade.db') }));

  it('creates the database file owner-only (0600)', async () => {
    const own = join(dir, 'fresh.db');
    const store = await openStore({ kind: 'sqlite', file: own });
    await store.migrate();
    await store.ensureTenant('t', 'T', 1);
    expect(statSync(own).mode & 0o777).toBe(0o600);
    expect(statSync(`${own}-wal`).mode & 0o777).toBe(0o600);
    await store.close();
  });

  it('opens an existing file without truncating or re-permissioning it', async () => {
    const own = join(dir, 'existing.db');
    const first = await openStore({ kind: 'sqlite', file: own });
    await first.migrate();
    await first.ensureTenant('t', 'T', 1);
    await first.putDagVersion('t', minimalSpec('kept'), 'h', 1);
    await first.close();

    const second = await openStore({ kind: 'sqlite', file: own });
    await second.migrate();
    expect((await second.getDag('t', 'kept'))?.current_version).toBe(1);
    await second.close();
  });

  it('runs with WAL, foreign keys, busy_timeout and synchronous=NORMAL', async () => {
    const store = (await openStore({
      kind: 'sqlite',
      file: join(dir, 'pragmas.db'),
    })) as KyselyStore;
    const pragma = async (name: string) => {
      const { rows } = await sql<Record<string, unknown>>`${sql.raw(`pragma ${name}`)}`.execute(
        store.kysely,
      );
      return Object.values(rows[0] ?? {})[0];
    };
    expect(await pragma('journal_mode')).toBe('wal');
    expect(await pragma('foreign_keys')).toBe(1);
    expect(await pragma('busy_timeout')).toBe(5000);
    expect(await pragma('synchronous')).toBe(1);
    await store.close();
  });

  it('rejects a file that is not a database instead of overwriting it', async () => {
    const junk = join(dir, 'junk.db');
    writeFileSync(junk, 'this is not sqlite '.repeat(100));
    await expect(
      (async () => {
        const store = await openStore({ kind: 'sqlite', file: junk });
        await store.migrate();
      })(),
    ).rejects.toThrow();
  });
});
