import type { FastifyRequest } from 'fastify';
import type { Clock } from '@leoflow/core';
import type { Store } from '../store/store.js';

/**
 * Records a mutation. Best-effort by design: an audit failure is logged and never changes the
 * result of the action it records. Payloads carry counts and flags, never secret values.
 */
export async function auditRequest(
  store: Store,
  clock: Clock,
  req: FastifyRequest,
  action: string,
  resource: { type: string; id: string },
  payload: Record<string, unknown> = {},
): Promise<void> {
  try {
    await store.appendAudit({
      tenant_id: req.principal.tenant_id,
      at: clock.now(),
      actor: `user:${req.principal.subject}`,
      action,
      resource_type: resource.type,
      resource_id: resource.id,
      request_id: req.id,
      payload,
    });
  } catch (err) {
    req.log.warn({ err, action }, 'audit write failed');
  }
}
