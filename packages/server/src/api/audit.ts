import type { FastifyRequest } from 'fastify';
import type { TenantScope } from './tenancy/tenant-scope.js';

/** How an audit entry names who acted: the token's subject, its tenant and its jti. */
export function actorOf(req: FastifyRequest): string {
  const p = req.principal;
  return `user:${p.subject}@${p.tenant_id}`;
}

/**
 * Records a mutation. Best-effort by design: an audit failure is logged and never changes the
 * result of the action it records. Payloads carry counts and flags, never secret values.
 * `scope` defaults to the caller's tenant; platform actions pass the tenant they acted on.
 */
export async function auditRequest(
  req: FastifyRequest,
  action: string,
  resource: { type: string; id: string },
  payload: Record<string, unknown> = {},
  scope: TenantScope = req.scope,
): Promise<void> {
  try {
    await scope.recordAudit({
      actor: actorOf(req),
      action,
      resource,
      request_id: req.id,
      payload: { ...payload, token_id: req.principal.jti },
    });
  } catch (err) {
    req.log.warn({ err, action }, 'audit write failed');
  }
}
