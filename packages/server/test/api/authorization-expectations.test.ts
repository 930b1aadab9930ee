import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTE_PERMISSIONS } from '../../src/api/route-permissions.js';
import {
  createApiHarness,
  PLATFORM_TENANT,
  type ApiHarness,
  type SeededTenant,
} from '../support/api-harness.js';
import { routeCases } from './route-fixtures.js';

/**
 * Issue 34, finding 5: the generated authorization matrix (authorization-matrix.test.ts) reads
 * ROUTE_PERMISSIONS and the roles of @leoflow/core, so weakening an entry there turns nothing red.
 * This table is written BY HAND from docs/api.md's role table — for each route, the least role
 * that may call it — and nothing here reads a permission: a route whose permission changes in
 * code without this table (and the docs) changing fails below.
 *
 *   viewer    dags, runs, logs, XCom, masked Variables and Connections, runners: read
 *   developer + push DAGs, trigger/clear runs, write Variables and Connections, test Connections
 *   operator  + pause DAGs, mark tasks and runs success/failed, revoke attempt credentials, audit, tokens (read), runners (create/delete)
 *   admin     + reveal and grant Variables and Connections, create/revoke tokens
 *   platform  admin of the platform tenant only: tenants, cells, keys, doctor
 */
type Least = 'any' | 'viewer' | 'developer' | 'operator' | 'admin' | 'platform';

const EXPECTED: Record<string, Least> = {
  'GET /api/v1/whoami': 'any',
  'GET /api/v1/roles': 'any',

  'GET /api/v1/dags': 'viewer',
  'POST /api/v1/dags': 'developer',
  'GET /api/v1/dags/:dag_id': 'viewer',
  'PATCH /api/v1/dags/:dag_id': 'operator',
  'GET /api/v1/dags/:dag_id/versions': 'viewer',
  'GET /api/v1/dags/:dag_id/versions/:version': 'viewer',
  'GET /api/v1/import-errors': 'viewer',

  'POST /api/v1/dags/:dag_id/runs': 'developer',
  'GET /api/v1/runs': 'viewer',
  'GET /api/v1/dags/:dag_id/grid': 'viewer',
  'GET /api/v1/dags/:dag_id/runs/:run_id': 'viewer',
  'POST /api/v1/dags/:dag_id/runs/:run_id/clear': 'developer',
  'POST /api/v1/dags/:dag_id/runs/:run_id/mark': 'operator',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks': 'viewer',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id': 'viewer',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/logs': 'viewer',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/xcom': 'viewer',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/mapped': 'viewer',
  'POST /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/revoke-credential': 'operator',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/delivery': 'viewer',
  'GET /api/v1/secrets/undeclared-use': 'operator',

  'GET /api/v1/variables': 'viewer',
  'GET /api/v1/variables/:key': 'viewer',
  'PUT /api/v1/variables/:key': 'developer',
  'DELETE /api/v1/variables/:key': 'developer',
  'POST /api/v1/variables/import': 'developer',
  'POST /api/v1/variables/export': 'admin',
  'GET /api/v1/variables/:key/grants': 'viewer',
  'PUT /api/v1/variables/:key/grants': 'admin',

  'GET /api/v1/connections': 'viewer',
  'GET /api/v1/connections/:id': 'viewer',
  'POST /api/v1/connections/:id/reveal': 'admin',
  'PUT /api/v1/connections/:id': 'developer',
  'DELETE /api/v1/connections/:id': 'developer',
  'POST /api/v1/connections/:id/test': 'developer',
  'POST /api/v1/connections/import': 'developer',
  'POST /api/v1/connections/export': 'admin',
  'GET /api/v1/connections/:id/grants': 'viewer',
  'PUT /api/v1/connections/:id/grants': 'admin',

  'GET /api/v1/audit': 'operator',

  'GET /api/v1/runners': 'viewer',
  'POST /api/v1/runners': 'operator',
  'GET /api/v1/runners/:name': 'viewer',
  'POST /api/v1/runners/:name/reveal-token': 'operator',
  'DELETE /api/v1/runners/:name': 'operator',

  'GET /api/v1/tokens': 'operator',
  'POST /api/v1/tokens': 'admin',
  'DELETE /api/v1/tokens/:jti': 'admin',

  'GET /api/v1/cells': 'platform',
  'POST /api/v1/cells': 'platform',
  'PUT /api/v1/tenants/:tenant_id/placement': 'platform',
  'POST /api/v1/cells/:cell/drain': 'platform',
  'GET /api/v1/tenants': 'platform',
  'POST /api/v1/tenants': 'platform',
  'POST /api/v1/tenants/:tenant_id/tokens': 'platform',
  'POST /api/v1/secrets/rotate-key': 'platform',
  'POST /api/v1/auth/signing-keys/rotate': 'platform',
  'GET /api/v1/doctor': 'platform',
};

const PUBLIC = [
  'GET /api/v1/health',
  'GET /healthz',
  'GET /readyz',
  'GET /api/v1/openapi.json',
  'GET /api/v1/docs',
];

const ROLES = ['viewer', 'developer', 'operator', 'admin'] as const;
const RANK = { viewer: 0, developer: 1, operator: 2, admin: 3 } as const;

function expectedAllowed(least: Least, role: (typeof ROLES)[number], platform: boolean): boolean {
  if (least === 'any') return true;
  if (least === 'platform') return role === 'admin' && platform;
  return RANK[role] >= RANK[least];
}

describe('authorization: the hand-written expectations (docs/api.md role table)', () => {
  let h: ApiHarness;
  const seeded = new Map<string, SeededTenant>();
  const tokens = new Map<string, string>();

  beforeAll(async () => {
    h = await createApiHarness('sqlite');
    for (const tenant of [PLATFORM_TENANT, 'team-x']) {
      seeded.set(tenant, await h.seedTenant(tenant));
      for (const role of ROLES) tokens.set(`${tenant}/${role}`, await h.tokenFor(tenant, role));
    }
  });
  afterAll(() => h.close());

  it('names every route of the server, and no other (a new route needs a line here)', () => {
    expect(new Set([...Object.keys(EXPECTED), ...PUBLIC])).toEqual(
      new Set(Object.keys(ROUTE_PERMISSIONS)),
    );
  });

  const cases = routeCases().filter((c) => !PUBLIC.includes(c.key));
  for (const tenant of ['team-x', PLATFORM_TENANT]) {
    const platform = tenant === PLATFORM_TENANT;
    it(`every role × every route, in ${platform ? 'the platform tenant' : 'an ordinary tenant'}`, async () => {
      const wrong: string[] = [];
      for (const role of ROLES) {
        for (const c of cases) {
          const least = EXPECTED[c.key];
          if (least === undefined) continue; // reported by the test above
          const allowed = expectedAllowed(least, role, platform);
          const t = seeded.get(tenant)!;
          const res = await h.request(
            tokens.get(`${tenant}/${role}`)!,
            c.method,
            c.url(t),
            allowed ? c.body(t) : { definitely: 'not valid' },
          );
          const got = res.status === 403 && (res.json as { code?: string }).code === 'LF_FORBIDDEN';
          if (allowed === got || (allowed && res.status === 401))
            wrong.push(
              `${role} ${c.key}: expected ${allowed ? 'allowed' : 'denied'}, got ${res.status}`,
            );
        }
      }
      expect(wrong).toEqual([]);
    });
  }
});
