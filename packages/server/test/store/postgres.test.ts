import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import {
  POSTGRES_HOWTO,
  postgresAvailability,
  postgresRequired,
  postgresTestUrl,
  useFreshPostgresSchema,
} from '../support/databases.js';
import { registerStoreSuite } from './store.suite.js';
import { registerUpgradeCase } from './upgrade.case.js';
import { minimalSpec } from '../support/spec-builders.js';

const availability = await postgresAvailability();

function registerPostgresTests(): void {
  describe('postgres storage suite', () => {
    const schema = useFreshPostgresSchema('store');
    registerStoreSuite({
      open: () => openStore({ kind: 'postgres', url: postgresTestUrl(), schema: schema() }),
    });
  });

  describe('postgres specifics', () => {
    const schemaA = useFreshPostgresSchema('store_a');
    const schemaB = useFreshPostgresSchema('store_b');
    const schemaUpgrade = useFreshPostgresSchema('store_upgrade');

    registerUpgradeCase(
      () => openStore({ kind: 'postgres', url: postgresTestUrl(), schema: schemaUpgrade() }),
      schemaUpgrade,
    );

    it('keeps schemas apart, each with its own migration bookkeeping', async () => {
      const a = await openStore({ kind: 'postgres', url: postgresTestUrl(), schema: schemaA() });
      await a.migrate();
      await a.ensureTenant('t', 'T', 1);
      // Migrating B while A's tables exist must still create B's own tables.
      const b = await openStore({ kind: 'postgres', url: postgresTestUrl(), schema: schemaB() });
      await b.migrate();
      await b.ensureTenant('t', 'T', 1);
      await a.putDagVersion('t', minimalSpec('only-in-a'), 'h', 1);
      expect(await b.getDag('t', 'only-in-a')).toBeUndefined();
      expect((await a.getDag('t', 'only-in-a'))?.current_version).toBe(1);
      await Promise.all([a.close(), b.close()]);
    });

    it('creates a missing schema and migrates concurrently from several processes safely', async () => {
      const name = `${schemaA()}_created`;
      const stores = await Promise.all(
        [1, 2, 3].map(() => openStore({ kind: 'postgres', url: postgresTestUrl(), schema: name })),
      );
      try {
        await Promise.all(stores.map((s) => s.migrate()));
        await stores[0]?.ensureTenant('t', 'T', 1);
        expect(await stores[1]?.listDags('t', { limit: 1, offset: 0 })).toEqual([]);
      } finally {
        await Promise.all(stores.map((s) => s.close()));
        const c = new pg.Client({ connectionString: postgresTestUrl() });
        await c.connect();
        await c.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
        await c.end();
      }
    });

    it('parses int8 as numbers on its own pool only, leaving the global pg parsers alone', async () => {
      const s = await openStore({ kind: 'postgres', url: postgresTestUrl(), schema: schemaA() });
      await s.migrate();
      expect(pg.types.getTypeParser(20, 'text')('12')).toBe('12');
      await s.close();
    });
  });
}

if (availability.ok) {
  registerPostgresTests();
} else if (postgresRequired()) {
  describe('postgres storage suite', () => {
    it('requires PostgreSQL (LEOFLOW_TEST_REQUIRE_POSTGRES=1 or CI=true)', () => {
      throw new Error(
        `PostgreSQL is required but unreachable: ${availability.reason}. To fix: ${POSTGRES_HOWTO}.`,
      );
    });
  });
} else {
  process.stderr.write(
    `postgres storage suite skipped: ${availability.reason}; set LEOFLOW_TEST_POSTGRES_URL or start PostgreSQL\n`,
  );
  // Registered but skipped, so the run's summary counts every test that did not run.
  describe.skip('postgres (unavailable)', registerPostgresTests);
}
