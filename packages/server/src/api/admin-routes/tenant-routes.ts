import type { FastifyInstance } from 'fastify';

import { auditRequest } from '../audit.js';
import { listReply, nextOffset, pageQuery, stdErrors } from '../schemas.js';
import { iso } from '../serialize.js';
import { AdminRouteDeps, tenantSchema } from './admin-shared.js';
import { typedApi } from '../typed-routes.js';

/** Tenants (platform): list and create. */
export function registerTenantRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  const api = typedApi(app);
  const { platform, scopes } = deps;
  api.get(
    '/api/v1/tenants',
    {
      schema: {
        summary: 'Every tenant (platform admins only)',
        querystring: { type: 'object', properties: pageQuery, additionalProperties: false },
        response: { 200: listReply('tenants', tenantSchema), ...stdErrors },
      },
    },
    async (req) => {
      const q = req.query;
      const rows = await platform.listTenants(q);
      return {
        tenants: rows.map((t) => ({ id: t.id, name: t.name, created_at: iso(t.created_at) })),
        next_offset: nextOffset(rows.length, q),
      };
    },
  );

  api.post(
    '/api/v1/tenants',
    {
      schema: {
        summary: 'Create a tenant (platform admins only)',
        body: {
          type: 'object',
          required: ['id'],
          properties: {
            id: { type: 'string', minLength: 1, maxLength: 63 },
            name: { type: 'string', minLength: 1, maxLength: 200 },
          },
          additionalProperties: false,
        },
        response: { 201: tenantSchema, ...stdErrors },
      },
    },
    async (req, reply) => {
      const body = req.body;
      const t = await platform.createTenant(body.id, body.name);
      await auditRequest(req, 'tenant.create', { type: 'tenant', id: t.id });
      await auditRequest(
        req,
        'tenant.create',
        { type: 'tenant', id: t.id },
        {},
        scopes.forTenant(t.id),
      );
      return reply.status(201).send({ id: t.id, name: t.name, created_at: iso(t.created_at) });
    },
  );
}
