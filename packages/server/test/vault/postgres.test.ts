import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { openDirectory } from '../../src/store/kysely-directory.js';
import {
  POSTGRES_HOWTO,
  postgresAvailability,
  postgresRequired,
  postgresTestUrl,
} from '../support/databases.js';
import { registerVaultSuite } from './vault.suite.js';

const availability = await postgresAvailability();

function registerPostgresTests(): void {
  // One schema per fresh database: rotation spans every tenant of a database.
  const schemas: string[] = [];
  afterAll(async () => {
    if (schemas.length === 0) return;
    const c = new pg.Client({ connectionString: postgresTestUrl() });
    await c.connect();
    try {
      for (const s of schemas) await c.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    } finally {
      await c.end();
    }
  });

  describe('vault service on postgres', () => {
    registerVaultSuite({
      fresh: async () => {
        const schema = `lf_test_vault_${process.pid}_${randomBytes(4).toString('hex')}`;
        schemas.push(schema, `${schema}_dir`);
        const store = await openStore({ kind: 'postgres', url: postgresTestUrl(), schema });
        await store.migrate();
        // Pro's directory: a schema of its own, as in production
        const directory = await openDirectory({
          kind: 'postgres',
          url: postgresTestUrl(),
          schema: `${schema}_dir`,
        });
        await directory.migrate();
        return {
          store,
          directory,
          // Every row of the vault tables as the server renders it (bytea as hex), plus the
          // raw bytea values themselves.
          dump: async () => {
            const c = new pg.Client({ connectionString: postgresTestUrl() });
            await c.connect();
            try {
              const parts: Buffer[] = [];
              for (const table of ['variables', 'connections', 'audit_log', 'task_instances']) {
                const { rows } = await c.query<{ t: string }>(
                  `select row_to_json(x)::text as t from "${schema}"."${table}" x`,
                );
                for (const r of rows) parts.push(Buffer.from(r.t));
              }
              const raw = await c.query<{ b: Buffer | null }>(
                `select value_cipher as b from "${schema}".variables
                 union all select secret_cipher from "${schema}".connections`,
              );
              for (const r of raw.rows) if (r.b !== null) parts.push(r.b);
              return Buffer.concat(parts);
            } finally {
              await c.end();
            }
          },
        };
      },
    });
  });
}

if (availability.ok) {
  registerPostgresTests();
} else if (postgresRequired()) {
  describe('vault service on postgres', () => {
    it('requires PostgreSQL (LEOFLOW_TEST_REQUIRE_POSTGRES=1 or CI=true)', () => {
      throw new Error(
        `PostgreSQL is required but unreachable: ${availability.reason}. To fix: ${POSTGRES_HOWTO}.`,
      );
    });
  });
} else {
  process.stderr.write(
    `postgres vault suite skipped: ${availability.reason}; set LEOFLOW_TEST_POSTGRES_URL or start PostgreSQL\n`,
  );
  describe.skip('vault service on postgres (unavailable)', registerPostgresTests);
}
