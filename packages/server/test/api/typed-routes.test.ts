import Fastify from 'fastify';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { paramsOf, pageQuery } from '../../src/api/schemas.js';
import { typedApi } from '../../src/api/typed-routes.js';

/**
 * A handler's request types come from its route's schema (api/typed-routes.ts). The type checks
 * below run under `npm run typecheck` (tsc -p packages/server/test): were the provider to type
 * requests as unknown or any again, they would fail there. The runtime case pins that the schema
 * those types come from is also what validates the request.
 */
describe('routes typed from their schemas', () => {
  it('types params, query and body from the schema that validates them', async () => {
    const app = Fastify();
    const api = typedApi(app);
    api.post(
      '/things/:thing_id',
      {
        schema: {
          params: paramsOf('thing_id'),
          querystring: { type: 'object', properties: pageQuery, additionalProperties: false },
          body: {
            type: 'object',
            required: ['name'],
            properties: { name: { type: 'string' }, count: { type: 'integer' } },
            additionalProperties: false,
          },
        },
      },
      (req) => {
        expectTypeOf(req.params.thing_id).toEqualTypeOf<string>();
        expectTypeOf(req.query.limit).toEqualTypeOf<number>();
        expectTypeOf(req.body.name).toEqualTypeOf<string>();
        expectTypeOf(req.body.count).toEqualTypeOf<number | undefined>();
        // @ts-expect-error: a field the schema does not declare is not on the type
        void req.body.other;
        return Promise.resolve({ id: req.params.thing_id, limit: req.query.limit });
      },
    );
    const ok = await app.inject({
      method: 'POST',
      url: '/things/a1?limit=5',
      payload: { name: 'x' },
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ id: 'a1', limit: 5 });
    const bad = await app.inject({ method: 'POST', url: '/things/a1', payload: { count: 1 } });
    expect(bad.statusCode).toBe(400);
    await app.close();
  });
});
