import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  POSTGRES_HOWTO,
  postgresAvailability,
  postgresRequired,
} from '../../packages/server/test/support/databases.js';
import { freshPostgresDatabase } from '../support/postgres-database.js';
import {
  cli,
  removeWorkRoots,
  startStandalone,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Tenants, tokens, roles and the audit log through the real `leoflow` CLI against a real
 * `leoflow standalone` process, once on its SQLite file and once on PostgreSQL.
 */
function tenancySuite(dialect: 'sqlite' | 'postgres'): void {
  describe(`tenants, tokens and roles via the CLI (${dialect})`, () => {
    let scratch: string;
    let s: Standalone;
    let drop: (() => Promise<void>) | undefined;
    const tokens: Record<string, string> = {};
    const as = (who: string, args: string[]) =>
      cli(args, {
        LEOFLOW_URL: s.url,
        LEOFLOW_TOKEN: tokens[who] ?? '',
        LEOFLOW_CLI_CONFIG: join(scratch, 'cli.yaml'),
      });

    beforeAll(async () => {
      scratch = mkdtempSync(join(tmpdir(), `leoflow-tenancy-${dialect}-`));
      const dags = join(scratch, 'dags');
      writeDag(dags, 'hello_t', 'dag_id: hello_t\ntasks:\n  - task_id: a\n    command: echo hi\n');
      let extraArgs: string[] = [];
      if (dialect === 'postgres') {
        const db = await freshPostgresDatabase('tenancy');
        drop = db.drop;
        extraArgs = ['--database-url', db.url];
      }
      s = await startStandalone({
        dataDir: join(scratch, 'data'),
        dagsFolder: dags,
        extraArgs,
        env: { LEOFLOW_EXECUTION_STANDBY_AGENTS: '0' },
      });
      tokens.admin = s.token;
    });
    afterAll(async () => {
      await s?.stop();
      await drop?.();
      removeWorkRoots(scratch);
      rmSync(scratch, { recursive: true, force: true });
    });

    it('a platform admin creates a tenant and mints its admin token, printed once', async () => {
      const t = await as('admin', ['tenants', 'create', 'team-b', '-o', 'json']);
      expect(t.code, t.stderr).toBe(0);
      expect(JSON.parse(t.stdout)).toMatchObject({ id: 'team-b' });
      const again = await as('admin', ['tenants', 'create', 'team-b']);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('already exists');

      const b = await as('admin', [
        'auth',
        'create-token',
        '--tenant',
        'team-b',
        '--role',
        'admin',
        '--name',
        'b-admin',
      ]);
      expect(b.code, b.stderr).toBe(0);
      tokens.bAdmin = b.stdout.trim();
      expect(tokens.bAdmin.split('.')).toHaveLength(3);
      expect(b.stderr).toContain('shown only this once');

      const v = await as('admin', [
        'auth',
        'create-token',
        '--role',
        'viewer',
        '--name',
        'v1',
        '--ttl',
        '1d',
        '-o',
        'json',
      ]);
      expect(v.code, v.stderr).toBe(0);
      const viewer = JSON.parse(v.stdout) as { token: string; role: string; expires_at: string };
      expect(viewer).toMatchObject({ role: 'viewer', expires_at: expect.any(String) });
      tokens.viewer = viewer.token;
    });

    it('a viewer reads but cannot trigger, and is told which role can', async () => {
      const list = await as('viewer', ['dags', 'list', '-o', 'json']);
      expect(list.code, list.stderr).toBe(0);
      expect(list.stdout).toContain('hello_t');
      const trig = await as('viewer', ['runs', 'trigger', 'hello_t']);
      expect(trig.code).toBe(1);
      expect(trig.stderr).toMatch(/viewer does not grant runs:trigger.*developer/);
      const me = await as('viewer', ['auth', 'whoami', '-o', 'json']);
      expect(JSON.parse(me.stdout)).toMatchObject({ tenant_id: 'default', role: 'viewer' });
    });

    it("tenant B's admin sees none of the default tenant's DAGs, runs or variables (404, not 403)", async () => {
      const run = await as('admin', ['runs', 'trigger', 'hello_t', '-o', 'json']);
      expect(run.code, run.stderr).toBe(0);
      const runId = (JSON.parse(run.stdout) as { run_id: string }).run_id;
      expect((await as('admin', ['variables', 'set', 'shared_name', 'default-only'])).code).toBe(0);

      const dags = await as('bAdmin', ['dags', 'list', '-o', 'json']);
      expect(dags.code).toBe(0);
      expect(dags.stdout).not.toContain('hello_t');
      const runs = await as('bAdmin', ['runs', 'list', '-o', 'json']);
      expect(runs.stdout).not.toContain(runId);
      const show = await as('bAdmin', ['runs', 'show', runId, '--dag', 'hello_t']);
      expect(show.code).toBe(1);
      expect(show.stderr).toMatch(/no DAG|no run/);
      const v = await as('bAdmin', ['variables', 'get', 'shared_name']);
      expect(v.code).toBe(1);
      expect(v.stderr).not.toContain('default-only');
      const tenants = await as('bAdmin', ['tenants', 'list']);
      expect(tenants.code).toBe(1);
      expect(tenants.stderr).toContain('platform tenant');
    });

    it('a revoked token is refused from the next command on; the others keep working', async () => {
      const rev = await as('admin', ['auth', 'revoke-token', 'v1', '-o', 'json']);
      expect(rev.code, rev.stderr).toBe(0);
      expect(JSON.parse(rev.stdout)).toMatchObject({ name: 'v1', revoked_at: expect.any(String) });
      const after = await as('viewer', ['dags', 'list']);
      expect(after.code).toBe(1);
      expect(after.stderr).toMatch(/revoked|invalid/);
      expect((await as('bAdmin', ['dags', 'list'])).code).toBe(0);
    });

    it('the audit log records who did what, in JSON, and never a token', async () => {
      const res = await as('admin', ['audit', 'list', '--since', '1h', '-o', 'json']);
      expect(res.code, res.stderr).toBe(0);
      const events = (JSON.parse(res.stdout) as { events: { action: string; actor: string }[] })
        .events;
      const actions = events.map((e) => e.action);
      for (const a of [
        'tenant.create',
        'token.create',
        'token.revoke',
        'run.trigger',
        'variable.set',
      ]) {
        expect(actions).toContain(a);
      }
      expect(events.every((e) => e.actor.endsWith('@default'))).toBe(true);
      for (const t of Object.values(tokens)) expect(res.stdout).not.toContain(t);
      const filtered = await as('admin', [
        'audit',
        'list',
        '--action',
        'token.revoke',
        '-o',
        'json',
      ]);
      expect((JSON.parse(filtered.stdout) as { events: unknown[] }).events).toHaveLength(1);
      const bad = await as('admin', ['audit', 'list', '--since', 'yesterday-ish']);
      expect(bad.code).toBe(2);
      // Tenant B's log: its creation and its token (by the platform admin), and its own admin's
      // refused `tenants list` — nothing of the default tenant's activity.
      const b = await as('bAdmin', ['audit', 'list', '-o', 'json']);
      const bEvents = (
        JSON.parse(b.stdout) as { events: { action: string; payload: { permission?: string } }[] }
      ).events;
      expect(new Set(bEvents.map((e) => e.action))).toEqual(
        new Set(['tenant.create', 'token.create', 'authz.denied']),
      );
      expect(bEvents.find((e) => e.action === 'authz.denied')?.payload.permission).toBe(
        'tenants:admin',
      );
    });

    it('lists every page: more Variables than one page holds all come back', async () => {
      const file = join(scratch, 'many-vars.json');
      const many = Object.fromEntries(
        Array.from({ length: 1005 }, (_, i) => [`page_var_${String(i).padStart(4, '0')}`, 'v']),
      );
      writeFileSync(file, JSON.stringify(many));
      const imp = await as('bAdmin', ['variables', 'import', file, '-o', 'json']);
      expect(imp.code, imp.stderr).toBe(0);
      const list = await as('bAdmin', ['variables', 'list', '-o', 'json']);
      expect(list.code, list.stderr).toBe(0);
      expect((JSON.parse(list.stdout) as { variables: unknown[] }).variables).toHaveLength(1005);
    });

    it('lists tokens without their secrets and exits 2 on usage errors', async () => {
      const list = await as('admin', ['auth', 'list-tokens', '--include-revoked', '-o', 'json']);
      expect(list.code).toBe(0);
      for (const t of Object.values(tokens)) expect(list.stdout).not.toContain(t);
      expect(list.stdout).toContain('"name": "v1"');
      expect((await as('admin', ['auth', 'create-token'])).code).toBe(2);
      // A pasted token is refused as an identifier and never echoed.
      const pasted = await as('admin', ['auth', 'revoke-token', tokens.bAdmin ?? '']);
      expect(pasted.code).toBe(2);
      expect(pasted.stderr).toContain('looks like a token');
      expect(pasted.stderr + pasted.stdout).not.toContain(tokens.bAdmin);
      const badRole = await as('admin', ['auth', 'create-token', '--role', 'root']);
      expect(badRole.code).toBe(1);
      expect(badRole.stderr).toMatch(/admin.*operator.*developer.*viewer|must be equal to one of/);
    });
  });
}

tenancySuite('sqlite');
const availability = await postgresAvailability();
if (availability.ok) {
  tenancySuite('postgres');
} else if (postgresRequired()) {
  describe('tenants, tokens and roles via the CLI (postgres)', () => {
    it('requires PostgreSQL (LEOFLOW_TEST_REQUIRE_POSTGRES=1 or CI=true)', () => {
      throw new Error(
        `PostgreSQL is required but unreachable: ${availability.reason}. To fix: ${POSTGRES_HOWTO}.`,
      );
    });
  });
} else {
  process.stderr.write(`tenancy CLI e2e on PostgreSQL skipped: ${availability.reason}\n`);
}
