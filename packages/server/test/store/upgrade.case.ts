import { Migrator } from 'kysely';
import { expect, it } from 'vitest';
import {
  KyselyStore,
  MIGRATION_LOCK_TABLE,
  MIGRATION_TABLE,
} from '../../src/store/kysely-store.js';
import { migrationProvider } from '../../src/store/migrations.js';
import type { Store } from '../../src/store/store.js';
import { minimalSpec } from '../support/spec-builders.js';

const T0 = 1_700_000_000_000;

/**
 * An install created before the vault existed must upgrade in place: migration 0002 runs over
 * live data, and rows written before it behave like new ones (not revoked, liveness intact).
 * `openFresh` returns a store over an empty database of its own.
 */
export function registerUpgradeCase(openFresh: () => Promise<Store>, schema?: () => string): void {
  it('migration 0002 upgrades a 0001 database with data in place', async () => {
    const store = await openFresh();
    if (!(store instanceof KyselyStore)) throw new Error('expected the Kysely store');
    try {
      const migrator = new Migrator({
        db: store.kysely,
        provider: migrationProvider(store.dialect),
        migrationTableName: MIGRATION_TABLE,
        migrationLockTableName: MIGRATION_LOCK_TABLE,
        ...(schema !== undefined ? { migrationTableSchema: schema() } : {}),
      });
      const first = await migrator.migrateTo('0001_initial');
      expect(first.error).toBeUndefined();

      await store.ensureTenant('t', 'T', T0);
      await store.putDagVersion('t', minimalSpec('old'), 'h', T0);
      const run = await store.createRun({
        tenant_id: 't',
        dag_id: 'old',
        run_id: 'r',
        run_type: 'manual',
        dag_version: 1,
        logical_date: null,
        data_interval_start: null,
        data_interval_end: null,
        conf: {},
        tasks: [{ task_id: 'a', max_tries: 1 }],
        now: T0,
      });
      if (run === undefined) throw new Error('run not created');
      const [ti] = await store.listTaskInstances(run.id);
      if (ti === undefined) throw new Error('no task instance');
      await store.updateTaskInstance(ti.id, { states: ['none'] }, { state: 'running' }, T0);

      await store.migrate();
      expect(await store.getAttemptLiveness(run.id, 'a', 1)).toEqual({
        live: true,
        revoked: false,
      });
      expect(await store.recordHeartbeat(ti.id, 1, T0 + 1)).toEqual({
        kind: 'live',
        terminate_requested: false,
        credential_revoked: false,
      });
      expect(await store.revokeAttemptCredential(ti.id, 1, T0 + 2)).toBe(true);
      expect((await store.getAttemptLiveness(run.id, 'a', 1)).revoked).toBe(true);
      await store.putVariable({
        tenant_id: 't',
        key: 'k',
        value_text: 'v',
        value_cipher: null,
        key_id: null,
        is_secret: false,
        description: '',
        created_at: T0,
        updated_at: T0,
      });
      expect(await store.countVariables('t')).toBe(1);
      expect((await store.getDag('t', 'old'))?.current_version).toBe(1);
    } finally {
      await store.close();
    }
  });
}
