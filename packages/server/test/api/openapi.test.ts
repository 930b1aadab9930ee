import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTE_PERMISSIONS } from '../../src/api/route-permissions.js';
import { openApiPath } from '../../src/api/openapi.js';
import {
  createApiHarness,
  PLATFORM_TENANT,
  type ApiHarness,
  type SeededTenant,
} from '../support/api-harness.js';
import { forEachDialect } from '../support/dialects.js';
import { routeCases } from './route-fixtures.js';

interface Operation {
  'x-leoflow-permission': string;
  summary: string;
  responses: Record<string, { content?: Record<string, { schema: object } | undefined> }>;
}
type Doc = { openapi: string; paths: Record<string, Record<string, Operation>> };

/**
 * The OpenAPI document is complete (every route, every permission) and true: every reply the
 * API gives on a tour of every route — successes and errors — validates against it.
 */
forEachDialect('OpenAPI document', (dialect) => {
  let h: ApiHarness;
  let doc: Doc;
  let t: SeededTenant;

  beforeAll(async () => {
    h = await createApiHarness(dialect);
    t = await h.seedTenant(PLATFORM_TENANT);
    const res = await h.request(null, 'GET', '/api/v1/openapi.json');
    expect(res.status).toBe(200);
    doc = res.json as unknown as Doc;
  });
  afterAll(() => h.close());

  it('is OpenAPI 3.1 and documents every route with the permission it needs', () => {
    expect(doc.openapi).toBe('3.1.0');
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    const expected = Object.keys(ROUTE_PERMISSIONS).map((k) => {
      const [m = '', url = ''] = k.split(' ');
      return `${m} ${openApiPath(url)}`;
    });
    expect(new Set(documented)).toEqual(new Set(expected));
    for (const [key, access] of Object.entries(ROUTE_PERMISSIONS)) {
      const [m = '', url = ''] = key.split(' ');
      const op = doc.paths[openApiPath(url)]?.[m.toLowerCase()];
      expect(op?.['x-leoflow-permission'], key).toBe(access);
      // Every operation says what it does (the default would just repeat the route).
      expect(op?.summary, key).not.toBe(key);
    }
  });

  it('every reply on a tour of every route validates against the document', async () => {
    const admin = t.adminToken;
    h.replies.length = 0;
    // Successes: every route once with a platform admin, destructive ones last.
    const destructive = (m: string) => (m === 'DELETE' ? 1 : 0);
    const cases = routeCases().sort((a, b) => destructive(a.method) - destructive(b.method));
    for (const c of cases) {
      if (c.key.endsWith('/revoke-credential')) await markTaskRunning(h, t);
      const token = c.access === 'public' ? null : admin;
      await h.request(token, c.method, c.url(t), c.body(t));
    }
    // Errors: a 400, a 401, a 403 and a 404 shape.
    await h.request(admin, 'PATCH', `/api/v1/dags/${t.dag_id}`, { is_paused: 'yes' });
    await h.request(null, 'GET', '/api/v1/dags');
    await h.request(await h.tokenFor(PLATFORM_TENANT, 'viewer'), 'POST', '/api/v1/tokens', {
      role: 'viewer',
    });
    await h.request(admin, 'GET', '/api/v1/dags/nope');

    const ajv = new Ajv2020({ strict: false, allErrors: true });
    const succeeded = new Set<string>();
    const problems: string[] = [];
    for (const r of h.replies) {
      const op = doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()];
      if (!op) {
        problems.push(`${r.method} ${r.url}: not in the document`);
        continue;
      }
      const response = op.responses[String(r.status)];
      if (!response) {
        problems.push(
          `${r.method} ${r.url}: status ${r.status} not documented (${r.body.slice(0, 200)})`,
        );
        continue;
      }
      if (r.status < 300) succeeded.add(`${r.method} ${r.url}`);
      const schema = response.content?.['application/json']?.schema;
      if (!schema) continue;
      const validate = ajv.compile(schema);
      if (!validate(JSON.parse(r.body))) {
        problems.push(`${r.method} ${r.url} ${r.status}: ${ajv.errorsText(validate.errors)}`);
      }
    }
    expect(problems).toEqual([]);
    // Every operation answered successfully at least once on the tour.
    expect([...Object.keys(ROUTE_PERMISSIONS)].filter((k) => !succeeded.has(k))).toEqual([]);
  });
});

describe('the docs page', () => {
  it('is HTML listing every route with its permission', async () => {
    const h = await createApiHarness('sqlite');
    try {
      const res = await h.request(null, 'GET', '/api/v1/docs');
      expect(res.status).toBe(200);
      expect(res.text).toContain('<table>');
      for (const key of Object.keys(ROUTE_PERMISSIONS)) {
        const [, url = ''] = key.split(' ');
        expect(res.text, key).toContain(openApiPath(url));
      }
      expect(res.text).toContain('runs:trigger');
    } finally {
      await h.close();
    }
  });
});

/** Revoking needs a live attempt: put the seeded task instance in `running`. */
async function markTaskRunning(h: ApiHarness, t: SeededTenant): Promise<void> {
  const run = await h.store.getRun(t.tenant, t.dag_id, t.run_id);
  const ti = run && (await h.store.getTaskInstance(run.id, t.task_id));
  if (!ti) throw new Error('seeded task instance missing');
  const ok = await h.store.updateTaskInstance(
    ti.id,
    { states: [ti.state] },
    { state: 'running', started_at: h.clock.now(), last_heartbeat_at: h.clock.now() },
    h.clock.now(),
  );
  if (!ok) throw new Error('could not mark the task running');
}
