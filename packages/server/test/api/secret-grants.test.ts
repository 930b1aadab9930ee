import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApiHarness, type ApiHarness, type SeededTenant } from '../support/api-harness.js';
import { forEachDialect } from '../support/dialects.js';
import { spec, task } from '../support/spec-builders.js';

/**
 * Secret grants over REST (issue 34): show and edit them, the narrowing preview (which
 * registered DAGs would lose a secret), the audit of a change, who may edit them, and
 * registration (`dags push`) refusing a DAG that declares an ungranted secret before anything
 * is written.
 */
forEachDialect('secret grants over the REST API', (dialect) => {
  let h: ApiHarness;
  let t: SeededTenant;
  let developer: string;
  beforeAll(async () => {
    h = await createApiHarness(dialect);
    t = await h.seedTenant('team-g');
    developer = await h.tokenFor('team-g', 'developer');
    await h.request(t.adminToken, 'PUT', '/api/v1/variables/g_token', {
      value: 'canary-grant-91c2',
      secret: true,
    });
    for (const dag_id of ['etl_daily', 'etl_weekly', 'report']) {
      const pushed = await h.request(
        t.adminToken,
        'POST',
        '/api/v1/dags',
        spec({ dag_id, tasks: [task('a', { variables: ['g_token'] })] }),
      );
      expect(pushed.status, JSON.stringify(pushed.json)).toBeLessThan(300);
    }
  });
  afterAll(() => h.close());

  const grantsUrl = '/api/v1/variables/g_token/grants';

  it('a new secret is granted to every DAG; the answer lists the registered DAGs that declare it', async () => {
    const r = await h.request(developer, 'GET', grantsUrl);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      name: 'g_token',
      grants: null,
      declared_by: [
        { dag_id: 'etl_daily', granted: true },
        { dag_id: 'etl_weekly', granted: true },
        { dag_id: 'report', granted: true },
      ],
    });
    const one = await h.request(developer, 'GET', '/api/v1/variables/g_token');
    expect(one.json).toMatchObject({ grants: null, value: '***' });
  });

  it('narrowing: the dry run lists who would lose it and writes nothing; the change does, audited', async () => {
    const dry = await h.request(t.adminToken, 'PUT', grantsUrl, {
      grants: ['etl_*'],
      dry_run: true,
    });
    expect(dry.status).toBe(200);
    expect(dry.json).toMatchObject({
      grants: ['etl_*'],
      previous: null,
      applied: false,
      losing: ['report'],
      gaining: [],
    });
    expect((await h.request(developer, 'GET', grantsUrl)).json.grants).toBeNull();
    const real = await h.request(t.adminToken, 'PUT', grantsUrl, { grants: ['etl_*'] });
    expect(real.json).toMatchObject({ applied: true, losing: ['report'] });
    expect((await h.request(developer, 'GET', grantsUrl)).json).toMatchObject({
      grants: ['etl_*'],
      declared_by: [
        { dag_id: 'etl_daily', granted: true },
        { dag_id: 'etl_weekly', granted: true },
        { dag_id: 'report', granted: false },
      ],
    });
    const audit = await h.request(t.adminToken, 'GET', '/api/v1/audit?action=variable.grants');
    const events = (audit.json as { events: { payload: Record<string, unknown> }[] }).events;
    expect(events).toHaveLength(1);
    expect(events[0]?.payload).toMatchObject({
      grants: ['etl_*'],
      previous: null,
      losing: ['report'],
    });
    expect(JSON.stringify(events)).not.toContain('canary-grant-91c2');
  });

  it('dags push refuses a DAG declaring an ungranted secret, naming it, before anything is written', async () => {
    const before = await h.store.getDag('team-g', 'reporting_v2');
    expect(before).toBeUndefined();
    const r = await h.request(
      developer,
      'POST',
      '/api/v1/dags',
      spec({ dag_id: 'reporting_v2', tasks: [task('a', { variables: ['g_token'] })] }),
    );
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({
      code: 'LF_SECRET_NOT_GRANTED',
      message:
        'dag "reporting_v2" declares variable(s) g_token not granted to it; ask an admin to add a pattern matching "reporting_v2" to the grants (leoflow variables set-grants) or remove them from the declaration',
    });
    expect(await h.store.getDag('team-g', 'reporting_v2')).toBeUndefined();
    // a DAG the grants name registers
    const ok = await h.request(
      developer,
      'POST',
      '/api/v1/dags',
      spec({ dag_id: 'etl_monthly', tasks: [task('a', { variables: ['g_token'] })] }),
    );
    expect(ok.status).toBeLessThan(300);
  });

  it('only a holder of variables:grant edits grants; an invalid pattern is refused and nothing changes', async () => {
    const denied = await h.request(developer, 'PUT', grantsUrl, { grants: null });
    expect(denied.status).toBe(403);
    expect(denied.json).toMatchObject({
      code: 'LF_FORBIDDEN',
      details: { permission: 'variables:grant' },
    });
    const bad = await h.request(t.adminToken, 'PUT', grantsUrl, { grants: ['etl/*'] });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ code: 'LF_SECRET_GRANT_INVALID' });
    expect((bad.json as { message: string }).message).toContain('pattern "etl/*" may use only');
    expect((await h.request(developer, 'GET', grantsUrl)).json.grants).toEqual(['etl_*']);
    const missing = await h.request(t.adminToken, 'PUT', '/api/v1/connections/nope/grants', {
      grants: [],
    });
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ code: 'LF_CONNECTION_NOT_FOUND' });
  });

  it('re-setting the secret keeps its grants', async () => {
    await h.request(t.adminToken, 'PUT', '/api/v1/variables/g_token', {
      value: 'canary-grant-rotated',
      secret: true,
    });
    expect((await h.request(developer, 'GET', grantsUrl)).json.grants).toEqual(['etl_*']);
  });
});
