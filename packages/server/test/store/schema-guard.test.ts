import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CompiledQuery,
  Kysely,
  PostgresDialect,
  sql,
  type Migration,
  type MigrationProvider,
} from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { isLeoflowError } from '@leoflow/core';
import { openStore } from '../../src/store/index.js';
import { KyselyStore, MIGRATION_TABLE, migrationLockName } from '../../src/store/kysely-store.js';
import { migrationProvider } from '../../src/store/migrations.js';
import { compareSchema, schemaStatus } from '../../src/store/schema-status.js';
import type { Database } from '../../src/store/db-types.js';
import type { Store } from '../../src/store/store.js';
import { forEachDialect, forPostgres } from '../support/dialects.js';
import { postgresTestUrl, useFreshPostgresSchema } from '../support/databases.js';

const root = mkdtempSync(join(tmpdir(), 'leoflow-schema-guard-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const FUTURE = '9999_from_a_newer_release';

/** The build's newest migration name, whatever count the build ships. */
async function buildNewest(dialect: 'sqlite' | 'postgres'): Promise<string> {
  const names = Object.keys(await migrationProvider(dialect).getMigrations()).sort();
  const last = names.at(-1);
  if (last === undefined) throw new Error('the build ships no migrations');
  return last;
}

async function recordForeignMigration(store: Store, name: string): Promise<void> {
  if (!(store instanceof KyselyStore)) throw new Error('expected the Kysely store');
  // What a newer release's migrate() leaves behind: a bookkeeping row this build does not know.
  await sql`insert into ${sql.table(MIGRATION_TABLE)} (name, timestamp) values (${name}, ${new Date().toISOString()})`.execute(
    store.kysely,
  );
}

describe('compareSchema (the rule)', () => {
  it('is current only with nothing pending and nothing unknown', () => {
    expect(compareSchema(['a', 'b'], ['a', 'b']).current).toBe(true);
    expect(compareSchema(['a', 'b'], ['a'])).toMatchObject({ current: false, pending: ['b'] });
    expect(compareSchema(['a', 'b'], ['a', 'b', 'c'])).toMatchObject({
      current: false,
      pending: [],
      unknown: ['c'],
    });
    // An unknown name sorting before the build's newest (another branch's migration) is still
    // a schema this build did not write.
    expect(compareSchema(['a', 'c'], ['a', 'b', 'c'])).toMatchObject({ unknown: ['b'] });
  });
});

forEachDialect('schema guard', (dialect) => {
  let n = 0;
  const schema = dialect === 'postgres' ? useFreshPostgresSchema('schema_guard') : undefined;
  const open = (): Promise<Store> => {
    n += 1;
    return dialect === 'sqlite'
      ? openStore({ kind: 'sqlite', file: join(root, `guard-${n}.db`) })
      : openStore({ kind: 'postgres', url: postgresTestUrl(), schema: `${schema?.()}_${n}` });
  };

  it('schemaStatus: all pending before migrate, current after', async () => {
    const store = await open();
    try {
      const before = await schemaStatus(store);
      expect(before.current).toBe(false);
      expect(before.applied).toEqual([]);
      expect(before.pending).toEqual(before.known);
      expect(before.known.at(-1)).toBe(await buildNewest(dialect));
      await store.migrate();
      const after = await schemaStatus(store);
      expect(after).toMatchObject({ current: true, pending: [], unknown: [] });
      expect(after.applied).toEqual(after.known);
    } finally {
      await store.close();
    }
  });

  it('refuses a schema migrated by a newer release, naming both newest migrations', async () => {
    const store = await open();
    try {
      await store.migrate();
      await recordForeignMigration(store, FUTURE);
      const status = await schemaStatus(store);
      expect(status).toMatchObject({ current: false, unknown: [FUTURE], pending: [] });

      const err: unknown = await store.migrate().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isLeoflowError(err) && err.code).toBe('LF_STORE_SCHEMA_NEWER');
      const message = err instanceof Error ? err.message : '';
      expect(message).toContain(FUTURE);
      expect(message).toContain(await buildNewest(dialect));
      expect(message).toContain('Upgrade this replica');
      expect(message).toContain('never roll the schema back');
    } finally {
      await store.close();
    }
  });

  it('a current schema migrates again as a no-op (a live replica is never refused)', async () => {
    const store = await open();
    try {
      await store.migrate();
      await store.migrate();
      expect((await schemaStatus(store)).current).toBe(true);
    } finally {
      await store.close();
    }
  });
});

forPostgres('migration lock', () => {
  const base = useFreshPostgresSchema('migration_lock');

  it('a replica waits while another holds the migration lock, then finds nothing pending', async () => {
    const schema = `${base()}_held`;
    const holder = new pg.Client({ connectionString: postgresTestUrl() });
    await holder.connect();
    const store = await openStore({ kind: 'postgres', url: postgresTestUrl(), schema });
    try {
      const lock = [migrationLockName(schema)];
      await holder.query('select pg_advisory_lock(hashtextextended($1, 0))', lock);

      let finished = false;
      const migrating = store.migrate().then(() => {
        finished = true;
      });
      // Wait until the replica's session is queued on the lock (pg_locks, not a sleep).
      for (;;) {
        // A bigint advisory key shows in pg_locks as classid (high half) and objid (low half).
        const { rows } = await holder.query<{ waiting: string }>(
          `select count(*) as waiting from pg_locks
            where locktype = 'advisory' and not granted and objsubid = 1
              and ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`,
          lock,
        );
        if (Number(rows[0]?.waiting) > 0 || finished) break;
        await new Promise((r) => setImmediate(r));
      }
      expect(finished).toBe(false);
      expect((await schemaStatus(store)).applied).toEqual([]);

      await holder.query('select pg_advisory_unlock(hashtextextended($1, 0))', lock);
      await migrating;
      expect((await schemaStatus(store)).current).toBe(true);
    } finally {
      await holder.end();
      await store.close();
    }
  });

  it('N replicas starting at once apply each migration exactly once', async () => {
    const schema = `${base()}_race`;
    const applications: string[] = [];
    // The build's migrations, each also counting how many times its up() ran.
    const build = await migrationProvider('postgres').getMigrations();
    const counting: MigrationProvider = {
      getMigrations: () =>
        Promise.resolve(
          Object.fromEntries(
            Object.entries(build).map(([name, m]): [string, Migration] => [
              name,
              {
                up: async (db) => {
                  applications.push(name);
                  await m.up(db);
                },
              },
            ]),
          ),
        ),
    };
    // The schema exists first (openStore creates it); then five replicas open and migrate at once.
    await (await openStore({ kind: 'postgres', url: postgresTestUrl(), schema })).close();
    const replicas = [1, 2, 3, 4, 5].map(() => openWith(schema, counting));
    try {
      await Promise.all(replicas.map((s) => s.migrate()));
      expect([...applications].sort()).toEqual(Object.keys(build).sort());
      for (const s of replicas) expect((await schemaStatus(s)).current).toBe(true);
    } finally {
      await Promise.all(replicas.map((s) => s.close()));
    }
  });
});

/** A PostgreSQL store over `schema` whose migrate() applies `provider`'s list (test-only hook). */
function openWith(schema: string, provider: MigrationProvider): KyselyStore {
  const pool = new pg.Pool({ connectionString: postgresTestUrl(), max: 2 });
  const quoted = `"${schema.replace(/"/g, '""')}"`;
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({
      pool,
      onCreateConnection: async (conn) => {
        await conn.executeQuery(CompiledQuery.raw(`SET search_path TO ${quoted}`));
      },
    }),
  });
  return new KyselyStore(db, { dialect: 'postgres', schema, migrations: provider });
}
