import {
  isAllowed,
  PLATFORM_PERMISSIONS,
  rolesAllowing,
  type Permission,
  AuthError,
} from '@leoflow/core';
import type { FastifyRequest } from 'fastify';
import type { UserPrincipal } from '../auth/user-token.js';
import { auditRequest } from './audit.js';

/** The platform tenant: where admins may act across tenants. Set once by buildApi. */
export interface AuthzContext {
  platformTenantId: string;
}

export function checkPermission(
  principal: UserPrincipal,
  permission: Permission,
  ctx: AuthzContext,
): void {
  if (isAllowed(principal, permission, ctx.platformTenantId)) return;
  if (PLATFORM_PERMISSIONS.has(permission) && principal.role === 'admin') {
    throw new AuthError(
      'LF_FORBIDDEN',
      `${permission} reaches every tenant, so only admins of the platform tenant "${ctx.platformTenantId}" hold it; ask one of them`,
      { permission },
    );
  }
  throw new AuthError(
    'LF_FORBIDDEN',
    `role ${principal.role} does not grant ${permission}; ask a tenant admin for a token with role ${rolesAllowing(permission).join(' or ')}`,
    { permission, role: principal.role },
  );
}

/**
 * The request-level check: a refusal is written to the tenant's audit log (`authz.denied`,
 * naming the route and the permission, never the body) before the 403 goes out, so security
 * people can see who tried what they may not do.
 */
export async function requirePermission(
  req: FastifyRequest,
  permission: Permission,
): Promise<void> {
  try {
    checkPermission(req.principal, permission, req.authz);
  } catch (err) {
    await auditRequest(
      req,
      'authz.denied',
      { type: 'route', id: `${req.method} ${req.routeOptions.url ?? ''}` },
      { permission, role: req.principal.role },
    );
    throw err;
  }
}
