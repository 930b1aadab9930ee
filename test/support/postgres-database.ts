import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { postgresTestUrl } from '../../packages/server/test/support/databases.js';

async function adminQuery(q: string): Promise<void> {
  const c = new pg.Client({ connectionString: postgresTestUrl(), connectionTimeoutMillis: 5_000 });
  c.on('error', () => undefined);
  await c.connect();
  try {
    await c.query(q);
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** A database of its own for one real server process; drop() removes it with everything in it. */
export async function freshPostgresDatabase(
  label: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `lf_${label}_${process.pid}_${randomBytes(4).toString('hex')}`;
  await adminQuery(`CREATE DATABASE "${name}"`);
  const u = new URL(postgresTestUrl());
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop: () => adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
  };
}
