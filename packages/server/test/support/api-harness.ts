import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpStatusOf, isRegisteredErrorCode, ManualClock, type RoleName } from '@leoflow/core';
import { pino } from 'pino';
import { buildApi } from '../../src/api/app.js';
import { ApiTokens } from '../../src/auth/api-tokens.js';
import { loadSigningKeyring } from '../../src/auth/signing-keys.js';
import { UserTokenIssuer } from '../../src/auth/user-token.js';
import { defaultServerConfig } from '../../src/config/server-config.js';
import { RunOperations } from '../../src/scheduler/run-operations.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/store.js';
import {
  directoryOnStore,
  openDirectory,
  type Directory,
} from '../../src/store/kysely-directory.js';
import { loadKeyring, VaultService } from '../../src/vault/index.js';
import { postgresTestUrl } from './databases.js';
import { RecordingExecutor, T0 } from './harness.js';
import { Executors } from '../../src/executor/executors.js';
import { spec, task } from './spec-builders.js';
import { buildRestApi, type RestApiDeps } from '../../src/boot/rest-api.js';
import { checkReadiness } from '../../src/api/probes/readiness.js';
import type { UiDeps } from '../../src/api/web-session/guard.js';

export const PLATFORM_TENANT = 'default';
/** the cell every harness directory holds (cells and placements have something to name) */
export const SEEDED_CELL = 'cell-a';

/**
 * The error replies among `replies` whose code is not in the error catalogue
 * (packages/core/src/errors/catalogue.ts), or whose status is not the one the catalogue declares.
 * LF_BAD_REQUEST is exempt from the status check: it also carries Fastify's own 4xx (415, …).
 */
export function uncataloguedErrorReplies(replies: readonly RecordedReply[]): string[] {
  const bad: string[] = [];
  for (const r of replies) {
    if (r.status < 400) continue;
    let code: unknown;
    try {
      code = (JSON.parse(r.body) as { code?: unknown }).code;
    } catch {
      code = undefined;
    }
    // Non-JSON error bodies (the web app's HTML pages) carry no code to check.
    if (code === undefined && !r.body.trimStart().startsWith('{')) continue;
    const where = `${r.method} ${r.url} -> ${r.status} ${String(code)}`;
    if (typeof code !== 'string' || !isRegisteredErrorCode(code))
      bad.push(`${where}: not registered`);
    else if (code !== 'LF_BAD_REQUEST' && httpStatusOf(code) !== r.status)
      bad.push(`${where}: the catalogue says ${httpStatusOf(code)}`);
  }
  return bad;
}

export interface RecordedReply {
  method: string;
  url: string;
  status: number;
  body: string;
}

/** What seedTenant created: every identifier a route can name. */
export interface SeededTenant {
  tenant: string;
  dag_id: string;
  run_id: string;
  task_id: string;
  variable: string;
  variableValue: string;
  connection: string;
  connectionPassword: string;
  /** an inbound runner of the tenant, and its token */
  runner: string;
  runnerToken: string;
  tokenJti: string;
  adminToken: string;
}

export interface ApiHarness {
  app: ReturnType<typeof buildApi>;
  store: Store;
  directory: Directory;
  clock: ManualClock;
  tokens: ApiTokens;
  users: UserTokenIssuer;
  replies: RecordedReply[];
  tokenFor(tenant: string, role: RoleName, ttlSeconds?: number): Promise<string>;
  seedTenant(tenant: string): Promise<SeededTenant>;
  request(
    token: string | null,
    method: string,
    url: string,
    body?: unknown,
  ): Promise<{ status: number; json: Record<string, unknown>; text: string }>;
  close(): Promise<void>;
}

/**
 * The real REST API over a real store (SQLite file or a fresh PostgreSQL schema), real vault
 * keyring file, real signing keyring and real token records; only the executor is a recorder.
 */
export async function createApiHarness(
  dialect: 'sqlite' | 'postgres',
  opts: {
    timeouts?: RestApiDeps['timeouts'];
    ui?: (clock: ManualClock, store: Store) => UiDeps;
    cellTopology?: RestApiDeps['cellTopology'];
  } = {},
): Promise<ApiHarness> {
  const dir = mkdtempSync(join(tmpdir(), 'leoflow-api-'));
  const pgSchema = `lf_api_${process.pid}_${randomBytes(4).toString('hex')}`;
  const store =
    dialect === 'postgres'
      ? await openStore({ kind: 'postgres', url: postgresTestUrl(), schema: pgSchema })
      : await openStore({ kind: 'sqlite', file: join(dir, 'leoflow.db') });
  await store.migrate();
  const directory =
    dialect === 'postgres'
      ? await openDirectory({ kind: 'postgres', url: postgresTestUrl(), schema: `${pgSchema}_dir` })
      : await directoryOnStore(store);
  await directory.migrate();
  const clock = new ManualClock(T0);
  await directory.insertCell({
    name: SEEDED_CELL,
    url: 'http://127.0.0.1:1',
    state: 'active',
    created_at: clock.now(),
    updated_at: clock.now(),
  });
  await store.ensureTenant(PLATFORM_TENANT, PLATFORM_TENANT, clock.now());
  const logger = pino({ level: 'silent' });
  const userKeys = await loadSigningKeyring(dir, 'user', { clock: () => clock.now() });
  const users = new UserTokenIssuer(userKeys);
  const tokens = new ApiTokens(store, users, clock);
  const loaded = await loadKeyring({ edition: 'lite', dataDir: dir, env: {} });
  const vault = new VaultService(store, loaded.keyring, { clock, runnerTokens: directory });
  const runs = new RunOperations(store, clock, () => undefined);
  const replies: RecordedReply[] = [];
  const app = buildRestApi({
    store,
    vault,
    runs,
    clock,
    logger,
    tokens,
    userKeys,
    revocation: {
      executors: new Executors([new RecordingExecutor()]),
      evictAttempt: () => undefined,
    },
    vaultKeyring: { dataDir: dir, source: loaded.source, file: loaded.file ?? null },
    doctorConfig: () => {
      const cfg = defaultServerConfig(dir);
      if (dialect === 'postgres') {
        cfg.database = { kind: 'postgres', url: postgresTestUrl(), schema: pgSchema };
      }
      return cfg;
    },
    platformTenantId: PLATFORM_TENANT,
    directory,
    cellTopology: opts.cellTopology ?? { kind: 'directory' },
    doorUrl: 'https://door.test',
    version: '0.0.0-test',
    onChange: () => undefined,
    onReply: (r) => replies.push(r),
    ...(opts.timeouts ? { timeouts: opts.timeouts } : {}),
    ...(opts.ui ? { ui: opts.ui(clock, store) } : {}),
    // As standalone's: the probes of one process that is always its own scheduler.
    readiness: () =>
      checkReadiness({
        migrationStatus: () => store.migrationStatus(),
        leaseHolder: null,
        leading: () => true,
        leaderGates: false,
        takeoverMs: 0,
        draining: () => false,
      }),
  });
  await app.ready();

  const tokenFor = async (tenant: string, role: RoleName, ttlSeconds?: number) => {
    await store.ensureTenant(tenant, tenant, clock.now());
    const { token } = await tokens.create({
      tenant_id: tenant,
      role,
      name: `${role}-${randomBytes(3).toString('hex')}`,
      created_by: 'test',
      ...(ttlSeconds !== undefined ? { ttlSeconds } : {}),
    });
    return token;
  };

  const request: ApiHarness['request'] = async (token, method, url, body) => {
    const res = await app.inject({
      method: method as 'GET',
      url,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
    let json: Record<string, unknown> = {};
    try {
      json = res.body ? (JSON.parse(res.body) as Record<string, unknown>) : {};
    } catch {
      json = {};
    }
    return { status: res.statusCode, json, text: res.body };
  };

  const seedTenant = async (tenant: string): Promise<SeededTenant> => {
    const adminToken = await tokenFor(tenant, 'admin');
    const s = tenant.replace(/[^a-z0-9]/g, '_');
    const seeded = {
      tenant,
      dag_id: `dag_${s}`,
      run_id: `run_${s}`,
      task_id: 'a',
      variable: `var_${s}`,
      variableValue: `value-of-${s}-${randomBytes(6).toString('hex')}`,
      connection: `conn_${s}`,
      connectionPassword: `pw-${s}-${randomBytes(6).toString('hex')}`,
    };
    const ok = async (method: string, url: string, body?: unknown) => {
      const r = await request(adminToken, method, url, body);
      if (r.status >= 300) throw new Error(`seed ${method} ${url}: ${r.status} ${r.text}`);
      return r.json;
    };
    await ok('POST', '/api/v1/dags', spec({ dag_id: seeded.dag_id, tasks: [task('a')] }));
    await ok('POST', `/api/v1/dags/${seeded.dag_id}/runs`, { run_id: seeded.run_id });
    await ok('PUT', `/api/v1/variables/${seeded.variable}`, {
      value: seeded.variableValue,
      secret: true,
    });
    await ok('PUT', `/api/v1/connections/${seeded.connection}`, {
      uri: `postgres://u:${seeded.connectionPassword}@db.${s}.internal:5432/x`,
    });
    const run = await store.getRun(tenant, seeded.dag_id, seeded.run_id);
    if (!run) throw new Error('seed: run missing');
    await store.appendLogs([
      {
        tenant_id: tenant,
        dag_run_id: run.id,
        task_id: 'a',
        try_number: 1,
        line_number: 1,
        time: clock.now(),
        stream: 'stdout',
        message: `log line of ${s}`,
      },
    ]);
    await store.putXCom({
      tenant_id: tenant,
      dag_run_id: run.id,
      task_id: 'a',
      key: 'return_value',
      value: new TextEncoder().encode(`xcom of ${s}`),
      content_type: 'text/plain',
      created_at: clock.now(),
    });
    const runner = `rnr-${s}`;
    const registered = (await ok('POST', '/api/v1/runners', { name: runner, kind: 'inbound' })) as {
      token: string;
    };
    const tokenRows = await store.listApiTokens(tenant, {}, { limit: 10, offset: 0 });
    return {
      ...seeded,
      runner,
      runnerToken: registered.token,
      tokenJti: tokenRows[0]?.jti ?? '',
      adminToken,
    };
  };

  return {
    app,
    store,
    directory,
    clock,
    tokens,
    users,
    replies,
    tokenFor,
    seedTenant,
    request,
    async close() {
      await app.close();
      await directory.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
      // Every suite on this harness checks that each error reply it saw is catalogued.
      const bad = uncataloguedErrorReplies(replies);
      if (bad.length > 0) {
        throw new Error(`error replies outside the error catalogue:\n  ${bad.join('\n  ')}`);
      }
    },
  };
}
