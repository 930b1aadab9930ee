import type { FromSchema } from 'json-schema-to-ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

import { actorOf, auditRequest } from '../audit.js';
import { listReply, nextOffset, pageQuery, paramsOf, stdErrors } from '../schemas.js';

import {
  AdminRouteDeps,
  tokenSchema,
  createdTokenSchema,
  createTokenBody,
  tokenOut,
} from './admin-shared.js';
import { typedApi } from '../typed-routes.js';

/** API tokens: list, create (for the caller's tenant or, on the platform, another's), revoke. */
export function registerTokenRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  const api = typedApi(app);
  const { platform, scopes } = deps;
  api.get(
    '/api/v1/tokens',
    {
      schema: {
        summary: "The tenant's API tokens (never the tokens themselves)",
        querystring: {
          type: 'object',
          properties: {
            ...pageQuery,
            include_revoked: { type: 'boolean', default: false },
            name: { type: 'string' },
          },
          additionalProperties: false,
        },
        response: { 200: listReply('tokens', tokenSchema), ...stdErrors },
      },
    },
    async (req) => {
      const q = req.query;
      const rows = await req.scope.listTokens(
        { include_revoked: q.include_revoked, ...(q.name !== undefined ? { name: q.name } : {}) },
        q,
      );
      return { tokens: rows.map(tokenOut), next_offset: nextOffset(rows.length, q) };
    },
  );

  api.post(
    '/api/v1/tokens',
    {
      schema: {
        summary: "Mint an API token in the caller's tenant; the reply is the only time it is shown",
        body: createTokenBody,
        response: { 201: createdTokenSchema, ...stdErrors },
      },
    },
    async (req, reply) => createToken(req, req.body, reply, req.principal.tenant_id),
  );

  api.delete(
    '/api/v1/tokens/:jti',
    {
      schema: {
        summary: 'Revoke a token of the tenant: it is refused from the next request on',
        params: paramsOf('jti'),
        response: { 200: tokenSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { jti } = req.params;
      const row = await req.scope.revokeToken(jti, actorOf(req));
      await auditRequest(req, 'token.revoke', { type: 'api_token', id: jti }, { name: row.name });
      return tokenOut(row);
    },
  );

  api.post(
    '/api/v1/tenants/:tenant_id/tokens',
    {
      schema: {
        summary: 'Mint an API token for any tenant (platform admins only); shown once',
        params: paramsOf('tenant_id'),
        body: createTokenBody,
        response: { 201: createdTokenSchema, ...stdErrors },
      },
    },
    async (req, reply) => createToken(req, req.body, reply, req.params.tenant_id),
  );

  async function createToken(
    req: FastifyRequest,
    body: FromSchema<typeof createTokenBody>,
    reply: FastifyReply,
    tenantId: string,
  ) {
    const { token, row } = await platform.createToken({
      tenant_id: tenantId,
      role: body.role,
      ...(body.name !== undefined ? { name: body.name } : {}),
      ...(body.ttl_seconds !== undefined ? { ttlSeconds: body.ttl_seconds } : {}),
      created_by: actorOf(req),
    });
    const payload = { role: row.role, name: row.name, tenant: row.tenant_id };
    await auditRequest(req, 'token.create', { type: 'api_token', id: row.jti }, payload);
    if (tenantId !== req.principal.tenant_id) {
      await auditRequest(
        req,
        'token.create',
        { type: 'api_token', id: row.jti },
        payload,
        scopes.forTenant(tenantId),
      );
    }
    return reply.status(201).send({ ...tokenOut(row), token });
  }
}
