import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach } from 'vitest';
import { openStore, type Store } from '../../../src/store/index.js';
import { postgresAvailability, postgresTestUrl } from '../../support/databases.js';

export type Dialect = 'sqlite' | 'postgres';

const availability = await postgresAvailability();
/** The dialects the warm-pool member tests run on: SQLite always, PostgreSQL when it answers. */
export const DIALECTS: Dialect[] = availability.ok ? ['sqlite', 'postgres'] : ['sqlite'];

/**
 * One fresh database per `fresh()` (an SQLite file, or a PostgreSQL schema), and `open()` for
 * each "replica" over it: a Store of its own (its own connection), migrated. Everything opened
 * is closed after each test; the schemas are dropped after the file.
 */
export function useMemberStores(dialect: Dialect) {
  const dir = mkdtempSync(join(tmpdir(), 'leoflow-warm-members-'));
  const opened: Store[] = [];
  const schemas: string[] = [];
  afterEach(async () => {
    while (opened.length) await opened.pop()!.close();
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    if (schemas.length === 0) return;
    const c = new pg.Client({ connectionString: postgresTestUrl() });
    await c.connect();
    for (const s of schemas) await c.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await c.end();
  });
  return {
    /** a new, empty database; `open()` gives another replica's store over it */
    fresh() {
      const id = randomBytes(4).toString('hex');
      const schema = `lf_test_warm_members_${process.pid}_${id}`;
      if (dialect === 'postgres') schemas.push(schema);
      return {
        async open(): Promise<Store> {
          const store =
            dialect === 'postgres'
              ? await openStore({ kind: 'postgres', url: postgresTestUrl(), schema })
              : await openStore({ kind: 'sqlite', file: join(dir, `${id}.db`) });
          opened.push(store);
          await store.migrate();
          return store;
        },
      };
    },
  };
}
