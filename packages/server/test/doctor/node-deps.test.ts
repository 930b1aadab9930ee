import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultServerConfig } from '../../src/config/server-config.js';
import { nodeDoctorDeps } from '../../src/doctor/node-deps.js';
import { buildDoctorReport } from '../../src/doctor/report.js';
import { openStore } from '../../src/store/index.js';
import type { KyselyStore } from '../../src/store/kysely-store.js';
import { migrations } from '../../src/store/migrations.js';

const root = mkdtempSync(join(tmpdir(), 'leoflow-doctor-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const ALL = Object.keys(migrations('sqlite')).sort();

/** A data dir laid out as standalone leaves it (files are placeholders, not real keys). */
async function dataDir(name: string, migrate: boolean): Promise<string> {
  const dir = join(root, name);
  mkdirSync(join(dir, 'keys'), { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  for (const f of [
    'keys/keyring.json',
    'keys/agent-signing-keys.json',
    'keys/user-signing-keys.json',
    'admin.token',
  ]) {
    writeFileSync(join(dir, f), '{}', { mode: 0o600 });
  }
  const store = await openStore({ kind: 'sqlite', file: join(dir, 'leoflow.db') });
  if (migrate) await store.migrate();
  await store.close();
  return dir;
}

describe('Store.migrationStatus (SQLite)', () => {
  it('reports every migration pending on a fresh database without creating anything', async () => {
    const file = join(root, 'status.db');
    const store = (await openStore({ kind: 'sqlite', file })) as KyselyStore;
    try {
      expect(await store.migrationStatus()).toEqual({ applied: [], pending: ALL, unknown: [] });
      const tables = await sql<{
        name: string;
      }>`select name from sqlite_master where type = 'table'`.execute(store.kysely);
      expect(tables.rows).toEqual([]);
      await store.migrate();
      expect(await store.migrationStatus()).toEqual({ applied: ALL, pending: [], unknown: [] });
    } finally {
      await store.close();
    }
  });

  it('turns secure_delete on for every SQLite connection', async () => {
    const store = (await openStore({ kind: 'sqlite', file: join(root, 'sd.db') })) as KyselyStore;
    try {
      const { rows } = await sql<{
        secure_delete: number;
      }>`PRAGMA secure_delete`.execute(store.kysely);
      expect(rows[0]?.secure_delete).toBe(1);
    } finally {
      await store.close();
    }
  });
});

describe('doctor on the real file system', () => {
  it('passes a migrated data dir: modes, migrations and secure_delete', async () => {
    const dir = await dataDir('good', true);
    const r = await buildDoctorReport(defaultServerConfig(dir), nodeDoctorDeps({}));
    const status = Object.fromEntries(r.checks.map((c) => [c.id, c.status]));
    expect(status).toMatchObject({
      'data_dir.exists': 'ok',
      'data_dir.mode': 'ok',
      'data_dir.owner': 'ok',
      'keys_dir.mode': 'ok',
      'key_file.vault_keyring': 'ok',
      'key_file.agent_signing_keys': 'ok',
      'key_file.user_signing_keys': 'ok',
      'key_file.admin_token': 'ok',
      'key_file.database': 'ok',
      'datastore.reachable': 'ok',
      'datastore.migrations': 'ok',
      'datastore.secure_delete': 'ok',
    });
    expect(r.summary.fail).toBe(0);
  });

  it('fails a database with pending migrations and does not migrate it', async () => {
    const dir = await dataDir('pending', false);
    const deps = nodeDoctorDeps({});
    const first = await buildDoctorReport(defaultServerConfig(dir), deps);
    const c = first.checks.find((k) => k.id === 'datastore.migrations');
    expect(c?.status).toBe('fail');
    expect(c?.message).toContain(ALL[0]);
    // Still pending the second time: doctor never migrates.
    const again = await buildDoctorReport(defaultServerConfig(dir), deps);
    expect(again.checks.find((k) => k.id === 'datastore.migrations')?.status).toBe('fail');
  });

  it('fails a 0755 data dir and a 0644 key file, naming the chmod to run', async () => {
    const dir = await dataDir('loose', true);
    chmodSync(dir, 0o755);
    chmodSync(join(dir, 'admin.token'), 0o644);
    const r = await buildDoctorReport(defaultServerConfig(dir), nodeDoctorDeps({}));
    expect(r.checks.find((k) => k.id === 'data_dir.mode')?.message).toContain(`chmod 700 ${dir}`);
    expect(r.checks.find((k) => k.id === 'key_file.admin_token')?.message).toContain(
      `chmod 600 ${join(dir, 'admin.token')}`,
    );
    expect(r.summary.fail).toBe(2);
  });

  it('never creates a missing data dir, its keys or its database', async () => {
    const dir = join(root, 'absent');
    const r = await buildDoctorReport(defaultServerConfig(dir), nodeDoctorDeps({}));
    expect(r.checks.find((k) => k.id === 'data_dir.exists')?.status).toBe('fail');
    expect(existsSync(dir)).toBe(false);

    // Present but empty: still no database or key file appears.
    const empty = join(root, 'empty');
    mkdirSync(empty, { mode: 0o700 });
    const e = await buildDoctorReport(defaultServerConfig(empty), nodeDoctorDeps({}));
    expect(e.checks.find((k) => k.id === 'datastore.reachable')?.status).toBe('fail');
    expect(existsSync(join(empty, 'leoflow.db'))).toBe(false);
    expect(existsSync(join(empty, 'keys'))).toBe(false);
  });
});
