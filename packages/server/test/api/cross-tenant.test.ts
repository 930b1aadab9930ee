import { afterAll, beforeAll, expect, it } from 'vitest';
import { PLATFORM_PERMISSIONS, type Permission } from '@leoflow/core';
import { createApiHarness, type ApiHarness, type SeededTenant } from '../support/api-harness.js';
import { forEachDialect } from '../support/dialects.js';
import { routeCases } from './route-fixtures.js';

/**
 * Tenant A's admin against every route, naming tenant B's objects. Generated from the route
 * table: objects named in the path answer 404 (never 403 — existence is not revealed), lists
 * show none of B's identifiers, upserts land in A's own namespace, and afterwards B's data is
 * exactly as it was.
 */
forEachDialect('cross-tenant isolation', (dialect) => {
  let h: ApiHarness;
  let a: SeededTenant;
  let b: SeededTenant;

  beforeAll(async () => {
    h = await createApiHarness(dialect);
    a = await h.seedTenant('team-a');
    b = await h.seedTenant('team-b');
  });
  afterAll(() => h.close());

  // Upserts last: a PUT creates A's own object of that name, which a later DELETE would find.
  const isUpsert = (m: string) => (m === 'PUT' ? 1 : 0);
  const cases = routeCases()
    .filter((c) => c.access !== 'public')
    .sort((x, y) => isUpsert(x.method) - isUpsert(y.method));

  for (const c of cases) {
    it(`${c.key} with tenant A's admin token on tenant B's objects`, async () => {
      const res = await h.request(a.adminToken, c.method, c.url(b), c.body(b));
      // What only tenant B could know never reaches A, whatever the route answers.
      const bContents = [
        b.variableValue,
        b.connectionPassword,
        'db.team_b.internal',
        'log line of team_b',
        'xcom of team_b',
        '@team-b',
      ];
      for (const secret of bContents) expect(res.text).not.toContain(secret);
      // Collections list none of B's objects (the audit log may name them: A's own 404s).
      if (c.method === 'GET' && !c.pattern.includes(':') && c.pattern !== '/api/v1/audit') {
        for (const id of [b.dag_id, b.run_id, b.variable, b.connection, b.tokenJti]) {
          expect(res.text).not.toContain(id);
        }
      }

      if (PLATFORM_PERMISSIONS.has(c.access as Permission)) {
        // Platform routes are refused to a tenant admin whatever they name.
        expect(res.status).toBe(403);
        return;
      }
      const namesObject = c.pattern.includes(':');
      if (namesObject && c.method !== 'PUT') {
        expect(res.status, res.text).toBe(404);
        expect(res.json).toMatchObject({ code: expect.stringMatching(/NOT_FOUND$/) });
      } else {
        // Collections and upserts act on tenant A's own namespace.
        expect(res.status, res.text).toBeLessThan(300);
      }
    });
  }

  it("leaves every one of tenant B's objects exactly as it was", async () => {
    const get = (url: string) => h.request(b.adminToken, 'GET', url);
    const dag = await get(`/api/v1/dags/${b.dag_id}`);
    expect(dag.status).toBe(200);
    expect(dag.json).toMatchObject({ dag: { is_paused: false, current_version: 1 } });
    const run = await get(`/api/v1/dags/${b.dag_id}/runs/${b.run_id}`);
    expect(run.json).toMatchObject({ task_instances: [{ task_id: 'a', try_number: 1 }] });
    expect((await get(`/api/v1/runs?dag_id=${b.dag_id}`)).json.runs).toHaveLength(1);
    const v = await get(`/api/v1/variables/${b.variable}?reveal=true`);
    expect(v.json).toMatchObject({ value: b.variableValue });
    const conn = await h.request(
      b.adminToken,
      'POST',
      `/api/v1/connections/${b.connection}/reveal`,
    );
    expect(conn.json).toMatchObject({ connection: { password: b.connectionPassword } });
    const logs = await get(`/api/v1/dags/${b.dag_id}/runs/${b.run_id}/tasks/a/logs`);
    expect(logs.json).toMatchObject({ lines: [{ message: 'log line of team_b' }] });
    const tokens = await get('/api/v1/tokens');
    expect(tokens.json.tokens).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: b.tokenJti, revoked_at: null })]),
    );
    // Nothing A did is in B's audit log.
    const audit = await get('/api/v1/audit?limit=1000');
    for (const e of audit.json.events as { actor: string }[]) {
      expect(e.actor).not.toContain('@team-a');
    }
  });

  it("tenant A's own objects of the same kind are reachable (the 404s are about tenancy)", async () => {
    const res = await h.request(a.adminToken, 'GET', `/api/v1/dags/${a.dag_id}/runs/${a.run_id}`);
    expect(res.status).toBe(200);
  });
});
