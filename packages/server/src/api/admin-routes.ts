import {
  BUILT_IN_ROLES,
  isAllowed,
  PERMISSIONS,
  PLATFORM_PERMISSIONS,
  ROLE_DESCRIPTIONS,
  ROLE_NAMES,
} from '@leoflow/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiTokenRow } from '../store/types.js';
import type { PlatformAdmin } from './tenancy/platform.js';
import type { TenantScopes } from './tenancy/tenant-scope.js';
import { actorOf, auditRequest } from './audit.js';
import { listReply, nextOffset, pageQuery, paramsOf, stdErrors } from './schemas.js';
import { iso } from './serialize.js';

export interface AdminRouteDeps {
  platform: PlatformAdmin;
  scopes: TenantScopes;
  platformTenantId: string;
}

const nullableString = { type: ['string', 'null'] } as const;

/** A token as lists show it: never the token itself. */
const tokenSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    tenant_id: { type: 'string' },
    name: { type: 'string' },
    role: { type: 'string' },
    created_by: { type: 'string' },
    created_at: { type: 'string' },
    expires_at: nullableString,
    revoked_at: nullableString,
    revoked_by: nullableString,
  },
} as const;

/** Only the create reply carries the token, once. */
const createdTokenSchema = {
  type: 'object',
  properties: { ...tokenSchema.properties, token: { type: 'string' } },
} as const;

const tenantSchema = {
  type: 'object',
  properties: { id: { type: 'string' }, name: { type: 'string' }, created_at: { type: 'string' } },
} as const;

const createTokenBody = {
  type: 'object',
  required: ['role'],
  properties: {
    role: { type: 'string', enum: ROLE_NAMES },
    name: { type: 'string', minLength: 1, maxLength: 100 },
    ttl_seconds: { type: 'integer', minimum: 1, maximum: 10 * 365 * 86400 },
  },
  additionalProperties: false,
} as const;

function tokenOut(t: ApiTokenRow) {
  return {
    id: t.jti,
    tenant_id: t.tenant_id,
    name: t.name,
    role: t.role,
    created_by: t.created_by,
    created_at: iso(t.created_at) ?? '',
    expires_at: iso(t.expires_at),
    revoked_at: iso(t.revoked_at),
    revoked_by: t.revoked_by,
  };
}

export function registerAdminRoutes(api: FastifyInstance, deps: AdminRouteDeps): void {
  const { platform, scopes, platformTenantId } = deps;

  api.get(
    '/api/v1/whoami',
    {
      schema: {
        summary: "The calling token's identity and effective permissions",
        response: {
          200: {
            type: 'object',
            properties: {
              subject: { type: 'string' },
              tenant_id: { type: 'string' },
              role: { type: 'string' },
              token_id: { type: 'string' },
              platform_tenant: { type: 'boolean' },
              permissions: { type: 'array', items: { type: 'string' } },
            },
          },
          ...stdErrors,
        },
      },
    },
    (req) => {
      const p = req.principal;
      return Promise.resolve({
        subject: p.subject,
        tenant_id: p.tenant_id,
        role: p.role,
        token_id: p.jti,
        platform_tenant: p.tenant_id === platformTenantId,
        permissions: PERMISSIONS.filter((perm) => isAllowed(p, perm, platformTenantId)),
      });
    },
  );

  api.get(
    '/api/v1/roles',
    {
      schema: {
        summary: 'The built-in roles and the permissions each grants',
        response: {
          200: {
            type: 'object',
            properties: {
              roles: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    name: { type: 'string' },
                    description: { type: 'string' },
                    permissions: { type: 'array', items: { type: 'string' } },
                  },
                },
              },
              platform_permissions: { type: 'array', items: { type: 'string' } },
            },
          },
          ...stdErrors,
        },
      },
    },
    () =>
      Promise.resolve({
        roles: ROLE_NAMES.map((name) => ({
          name,
          description: ROLE_DESCRIPTIONS[name],
          permissions: [...BUILT_IN_ROLES[name]],
        })),
        platform_permissions: [...PLATFORM_PERMISSIONS],
      }),
  );

  api.get(
    '/api/v1/audit',
    {
      schema: {
        summary: "The tenant's audit log, newest first",
        querystring: {
          type: 'object',
          properties: {
            ...pageQuery,
            since: { type: 'string', format: 'date-time' },
            action: { type: 'string' },
          },
          additionalProperties: false,
        },
        response: {
          200: listReply('events', {
            type: 'object',
            properties: {
              at: { type: 'string' },
              actor: { type: 'string' },
              action: { type: 'string' },
              resource_type: { type: 'string' },
              resource_id: { type: 'string' },
              request_id: nullableString,
              payload: { type: 'object', additionalProperties: true },
            },
          }),
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const q = req.query as { limit: number; offset: number; since?: string; action?: string };
      const events = await req.scope.listAudit(
        {
          ...(q.since ? { since: Date.parse(q.since) } : {}),
          ...(q.action ? { action: q.action } : {}),
        },
        { limit: q.limit, offset: q.offset },
      );
      return {
        events: events.map((e) => ({ ...e, at: new Date(e.at).toISOString() })),
        next_offset: nextOffset(events.length, q),
      };
    },
  );

  // ---- tokens of the caller's tenant ----
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
      const q = req.query as {
        limit: number;
        offset: number;
        include_revoked: boolean;
        name?: string;
      };
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
    async (req, reply) => createToken(req, reply, req.principal.tenant_id),
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
      const { jti } = req.params as { jti: string };
      const row = await req.scope.revokeToken(jti, actorOf(req));
      await auditRequest(req, 'token.revoke', { type: 'api_token', id: jti }, { name: row.name });
      return tokenOut(row);
    },
  );

  // ---- platform: tenants, cross-tenant tokens, keys ----
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
      const q = req.query as { limit: number; offset: number };
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
      const body = req.body as { id: string; name?: string };
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
    async (req, reply) => createToken(req, reply, (req.params as { tenant_id: string }).tenant_id),
  );

  api.post(
    '/api/v1/secrets/rotate-key',
    {
      schema: {
        summary: 'New vault key; re-encrypt every stored secret under it, online',
        body: {
          type: 'object',
          properties: {
            resume: { type: 'boolean', default: false },
            prune: { type: 'boolean', default: false },
          },
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            properties: {
              current_key_id: { type: 'string' },
              new_key: { type: 'boolean' },
              resealed: { type: 'integer' },
              remaining_under_old_keys: { type: 'integer' },
              pruned: { type: 'array', items: { type: 'string' } },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const body = (req.body ?? {}) as { resume?: boolean; prune?: boolean };
      const out = await platform.rotateVaultKey({
        resume: body.resume ?? false,
        prune: body.prune ?? false,
      });
      await auditRequest(
        req,
        'secret.key_rotate',
        { type: 'keyring', id: String(out.current_key_id) },
        {
          resealed: out.resealed,
          remaining: out.remaining_under_old_keys,
          pruned: Array.isArray(out.pruned) ? out.pruned.length : 0,
        },
      );
      return out;
    },
  );

  api.post(
    '/api/v1/auth/signing-keys/rotate',
    {
      schema: {
        summary:
          'New signing key for user API tokens; tokens signed by older keys keep working until revoked',
        response: {
          200: {
            type: 'object',
            properties: {
              kid: { type: 'string' },
              keys: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: { kid: { type: 'string' }, signing: { type: 'boolean' } },
                },
              },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const out = await platform.rotateUserSigningKey();
      await auditRequest(req, 'signing_key.rotate', { type: 'signing_key', id: out.kid });
      return out;
    },
  );

  const checkSchema = {
    type: 'object',
    required: ['id', 'status', 'message'],
    properties: {
      id: { type: 'string' },
      status: { type: 'string', enum: ['ok', 'warn', 'fail'] },
      message: { type: 'string' },
    },
  } as const;

  api.get(
    '/api/v1/doctor',
    {
      schema: {
        summary:
          "The running control plane's doctor report: effective configuration (redacted), posture with residual exposures, health checks",
        response: {
          200: {
            type: 'object',
            required: ['edition', 'config', 'posture', 'checks', 'summary'],
            properties: {
              edition: { type: 'string' },
              // Built redacted by the doctor (no key material, no token, database password ***).
              config: { type: 'object', additionalProperties: true },
              posture: { type: 'object', additionalProperties: true },
              checks: { type: 'array', items: checkSchema },
              summary: {
                type: 'object',
                properties: {
                  ok: { type: 'integer' },
                  warn: { type: 'integer' },
                  fail: { type: 'integer' },
                },
              },
            },
          },
          ...stdErrors,
        },
      },
    },
    () => platform.doctorReport(),
  );

  async function createToken(req: FastifyRequest, reply: FastifyReply, tenantId: string) {
    const body = req.body as { role: string; name?: string; ttl_seconds?: number };
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
