import {
  BUILT_IN_ROLES,
  isAllowed,
  PERMISSIONS,
  PLATFORM_PERMISSIONS,
  ROLE_DESCRIPTIONS,
  ROLE_NAMES,
} from '@leoflow/core';
import type { FastifyInstance } from 'fastify';

import { stdErrors } from '../schemas.js';

import { AdminRouteDeps } from './admin-shared.js';
import { typedApi } from '../typed-routes.js';

/** Who the caller is and what each role may do. */
export function registerIdentityRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  const api = typedApi(app);
  const { platformTenantId } = deps;
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
}
