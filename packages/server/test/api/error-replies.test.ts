import { ERROR_CATALOGUE, httpStatusOf, isRegisteredErrorCode } from '@leoflow/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApiHarness,
  uncataloguedErrorReplies,
  type ApiHarness,
  type SeededTenant,
} from '../support/api-harness.js';
import { forEachDialect } from '../support/dialects.js';

/**
 * The REST error handler takes every status from the error catalogue
 * (packages/core/src/errors/catalogue.ts): one error of each kind the handler answers, and
 * for each the code is registered and the status is the one the catalogue declares.
 */
forEachDialect('REST error replies follow the error catalogue', (dialect) => {
  let h: ApiHarness;
  let seeded: SeededTenant;
  let viewer: string;
  beforeAll(async () => {
    h = await createApiHarness(dialect);
    seeded = await h.seedTenant('team-e');
    viewer = await h.tokenFor('team-e', 'viewer');
  });
  afterAll(() => h.close());

  let deep = '1';
  for (let i = 0; i < 100; i++) deep = `[${deep}]`;

  const cases: [
    string,
    () => Promise<{ status: number; json: Record<string, unknown> }>,
    number,
    string,
  ][] = [
    ['no token', () => h.request(null, 'GET', '/api/v1/dags'), 401, 'LF_UNAUTHENTICATED'],
    [
      'a viewer writing a variable',
      () => h.request(viewer, 'PUT', '/api/v1/variables/x', { value: 'v' }),
      403,
      'LF_FORBIDDEN',
    ],
    ['an unknown route', () => h.request(viewer, 'GET', '/api/v1/nope'), 404, 'LF_ROUTE_NOT_FOUND'],
    [
      'an unknown DAG',
      () => h.request(viewer, 'GET', '/api/v1/dags/nope'),
      404,
      'LF_DAG_NOT_FOUND',
    ],
    [
      'an unknown variable',
      () => h.request(seeded.adminToken, 'GET', '/api/v1/variables/nope'),
      404,
      'LF_VARIABLE_NOT_FOUND',
    ],
    [
      'an unknown connection',
      () => h.request(seeded.adminToken, 'GET', '/api/v1/connections/nope'),
      404,
      'LF_CONNECTION_NOT_FOUND',
    ],
    [
      'a run id that exists',
      () =>
        h.request(seeded.adminToken, 'POST', `/api/v1/dags/${seeded.dag_id}/runs`, {
          run_id: seeded.run_id,
        }),
      409,
      'LF_RUN_EXISTS',
    ],
    [
      'a revocation of an attempt that does not exist (issue 34)',
      () =>
        h.request(
          seeded.adminToken,
          'POST',
          `/api/v1/dags/${seeded.dag_id}/runs/${seeded.run_id}/tasks/${seeded.task_id}/revoke-credential`,
          { try: 9 },
        ),
      404,
      'LF_ATTEMPT_NOT_FOUND',
    ],
    [
      'a connection URI that does not parse',
      () => h.request(seeded.adminToken, 'PUT', '/api/v1/connections/c1', { uri: 'not a uri' }),
      400,
      'LF_CONN_URI_INVALID',
    ],
    [
      'a body that fails the schema',
      () => h.request(seeded.adminToken, 'PUT', '/api/v1/variables/x', { nope: 1 }),
      400,
      'LF_BAD_REQUEST',
    ],
    [
      'a body nested too deeply',
      async () => {
        const res = await h.app.inject({
          method: 'PUT',
          url: '/api/v1/variables/x',
          headers: {
            authorization: `Bearer ${seeded.adminToken}`,
            'content-type': 'application/json',
          },
          payload: `{"value": ${deep}}`,
        });
        return { status: res.statusCode, json: JSON.parse(res.body) as Record<string, unknown> };
      },
      400,
      'LF_JSON_TOO_DEEP',
    ],
  ];

  for (const [what, call, status, code] of cases) {
    it(`${what}: ${status} ${code}, the status the catalogue declares`, async () => {
      const r = await call();
      expect(r.json.code).toBe(code);
      expect(r.status).toBe(status);
      expect(isRegisteredErrorCode(code)).toBe(true);
      expect(httpStatusOf(code)).toBe(status);
      expect(typeof r.json.message).toBe('string');
    });
  }

  it('every error reply this suite saw is catalogued with its status', () => {
    expect(h.replies.some((r) => r.status >= 400)).toBe(true);
    expect(uncataloguedErrorReplies(h.replies)).toEqual([]);
  });
});

describe('the runtime check on error replies', () => {
  it('flags a reply whose code is not registered, and one whose status disagrees', () => {
    const reply = (status: number, code: string) => ({
      method: 'GET',
      url: '/x',
      status,
      body: JSON.stringify({ code, message: 'm', details: {} }),
    });
    expect(ERROR_CATALOGUE.LF_DAG_NOT_FOUND.http).toBe(404);
    expect(uncataloguedErrorReplies([reply(404, 'LF_DAG_NOT_FOUND')])).toEqual([]);
    expect(uncataloguedErrorReplies([reply(400, 'LF_PLANTED_UNREGISTERED')])).toEqual([
      'GET /x -> 400 LF_PLANTED_UNREGISTERED: not registered',
    ]);
    expect(uncataloguedErrorReplies([reply(400, 'LF_DAG_NOT_FOUND')])).toEqual([
      'GET /x -> 400 LF_DAG_NOT_FOUND: the catalogue says 404',
    ]);
  });
});
