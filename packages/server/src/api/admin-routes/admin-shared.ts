import { ROLE_NAMES } from '@leoflow/core';

import type { ApiTokenRow } from '../../store/types.js';
import type { PlatformAdmin } from '../tenancy/platform.js';
import type { TenantScopes } from '../tenancy/tenant-scope.js';

import { iso } from '../serialize.js';
export interface AdminRouteDeps {
  platform: PlatformAdmin;
  scopes: TenantScopes;
  platformTenantId: string;
}

export const nullableString = { type: ['string', 'null'] } as const;

/** A token as lists show it: never the token itself. */
export const tokenSchema = {
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
export const createdTokenSchema = {
  type: 'object',
  properties: { ...tokenSchema.properties, token: { type: 'string' } },
} as const;

export const tenantSchema = {
  type: 'object',
  properties: { id: { type: 'string' }, name: { type: 'string' }, created_at: { type: 'string' } },
} as const;

export const createTokenBody = {
  type: 'object',
  required: ['role'],
  properties: {
    role: { type: 'string', enum: ROLE_NAMES },
    name: { type: 'string', minLength: 1, maxLength: 100 },
    ttl_seconds: { type: 'integer', minimum: 1, maximum: 10 * 365 * 86400 },
  },
  additionalProperties: false,
} as const;

export function tokenOut(t: ApiTokenRow) {
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
