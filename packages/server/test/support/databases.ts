import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';

const DEFAULT_URL = 'postgres://postgres@127.0.0.1:5432/test';

export const POSTGRES_HOWTO =
  'run scripts/dev-services.sh (installs and starts a local test PostgreSQL with a `test` ' +
  'database) or point LEOFLOW_TEST_POSTGRES_URL at one';

/** Where the Postgres half of the storage suite connects. */
export function postgresTestUrl(): string {
  const fromEnv = process.env.LEOFLOW_TEST_POSTGRES_URL;
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_URL;
}

/** True when a missing PostgreSQL must fail the run rather than skip the suite. */
export function postgresRequired(): boolean {
  return process.env.LEOFLOW_TEST_REQUIRE_POSTGRES === '1' || process.env.CI === 'true';
}

export async function postgresAvailability(): Promise<
  { ok: true } | { ok: false; reason: string }
> {
  const url = postgresTestUrl();
  const timeoutMs = 2_000;
  const started = Date.now();
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  // A connection that dies after connect() emits 'error'; unhandled, that would crash the run.
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
    return { ok: true };
  } catch (err) {
    const message = err instanceof Error && err.message !== '' ? err.message : String(err);
    // pg reports its own connect timeout as a generic "connection terminated".
    const detail = Date.now() - started >= timeoutMs ? `no answer within ${timeoutMs} ms` : message;
    return { ok: false, reason: `cannot connect to ${redactUrl(url)}: ${detail}` };
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Gives the calling test file its own schema, created in beforeAll and dropped (with
 * everything in it) in afterAll, so parallel test files and repeated runs never share tables.
 * Returns a getter because the name is only known once beforeAll has run.
 */
export function useFreshPostgresSchema(label: string): () => string {
  let schema: string | undefined;
  beforeAll(async () => {
    const safeLabel = label
      .toLowerCase()
      .replace(/[^a-z0-9_]/g, '_')
      .slice(0, 24);
    schema = `lf_test_${safeLabel}_${process.pid}_${randomBytes(4).toString('hex')}`;
    await withClient((c) => c.query(`CREATE SCHEMA "${schema}"`));
  });
  afterAll(async () => {
    if (schema === undefined) return;
    const name = schema;
    schema = undefined;
    await withClient((c) => c.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`));
  });
  return () => {
    if (schema === undefined) throw new Error('fresh postgres schema used outside its test file');
    return schema;
  };
}

async function withClient<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({
    connectionString: postgresTestUrl(),
    connectionTimeoutMillis: 5_000,
  });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable LEOFLOW_TEST_POSTGRES_URL)';
  }
}
