import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPostgresDatabase } from '../support/postgres-database.js';
import { startAgentService, startReplica, vaultKey, type Replica } from '../support/pro-cluster.js';
import { cli, scratchDir } from '../support/processes.js';

// What `leoflow server` refuses before it serves anything (docs/pro.md, "leoflow server"), and
// what a `scheduler` replica's HTTP port answers: the probes and nothing else.

let db: { url: string; drop: () => Promise<void> };
let scratch: { dir: string; cleanup: () => void };
let scheduler: Replica | undefined;
let service: Awaited<ReturnType<typeof startAgentService>> | undefined;

beforeAll(async () => {
  scratch = scratchDir('leoflow-server-refusals-');
  db = await freshPostgresDatabase('server_refusals');
}, 60_000);

afterAll(async () => {
  await scheduler?.kill9();
  await service?.close();
  await db?.drop();
  scratch?.cleanup();
});

const base = (name: string) => [
  'server',
  '--data-dir',
  join(scratch.dir, name),
  '--http-port',
  '0',
  '--agent-port',
  '0',
  '--metrics-port',
  '0',
];

describe('leoflow server refuses to start', () => {
  it('without PostgreSQL, naming standalone for SQLite', async () => {
    expect(process.env.LEOFLOW_DATABASE_URL).toBeUndefined();
    const r = await cli(base('no-db'), { LEOFLOW_SECRET_KEY: vaultKey() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('LF_CONFIG_PRO_NEEDS_POSTGRES');
    expect(r.stderr).toContain('leoflow standalone');
  });

  it('with an empty database URL: a value, refused by its key (never taken for unset)', async () => {
    const r = await cli(base('empty-db'), {
      LEOFLOW_SECRET_KEY: vaultKey(),
      LEOFLOW_DATABASE_URL: '',
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('database.url is "" (from env LEOFLOW_DATABASE_URL)');
  });

  it('with a cleartext agent channel on a non-loopback address', async () => {
    const r = await cli([...base('no-tls'), '--database-url', db.url, '--agent-host', '0.0.0.0'], {
      LEOFLOW_SECRET_KEY: vaultKey(),
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('LF_CONFIG_AGENT_TLS_REQUIRED');
  });

  it('without a vault key (Pro never generates one)', async () => {
    const r = await cli([...base('no-key'), '--database-url', db.url], {});
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('LF_SECRET_KEY_REQUIRED');
  });

  it('with a renew interval + safety margin that reach the lease ttl', async () => {
    const r = await cli(
      [
        ...base('bad-lease'),
        '--database-url',
        db.url,
        '--lease-ttl',
        '3s',
        '--lease-renew-interval',
        '2s',
        '--lease-safety-margin',
        '1s',
      ],
      {
        LEOFLOW_SECRET_KEY: vaultKey(),
      },
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('scheduler.lease_ttl');
  });
});

describe('a scheduler replica', () => {
  it('answers the probes on its HTTP port and serves no REST API', async () => {
    service = await startAgentService(() => (scheduler ? [scheduler.agentPort] : []));
    scheduler = await startReplica({
      name: 'sched',
      role: 'scheduler',
      root: scratch.dir,
      keysDir: join(scratch.dir, 'keys'),
      databaseUrl: db.url,
      agentServiceUrl: service.url,
      env: { LEOFLOW_SECRET_KEY: vaultKey() },
      lease: ['3s', '500ms', '1s'],
    });
    expect((await fetch(`${scheduler.url}/healthz`)).status).toBe(200);
    const ready = await scheduler.readyz();
    expect(ready.checks.map((c) => c.name)).toEqual([
      'draining',
      'parts',
      'store',
      'schema',
      'leader',
    ]);
    expect((await fetch(`${scheduler.url}/api/v1/health`)).status).toBe(404);
    expect((await fetch(`${scheduler.url}/`)).status).toBe(404);
  }, 90_000);
});
