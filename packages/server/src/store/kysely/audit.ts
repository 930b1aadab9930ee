import type { AuditStore } from '../ports/audit.js';
import type { Page } from '../types.js';
import type { AuditRecord, NewAuditRecord } from '../vault-types.js';
import { num } from './columns.js';
import { KyselySeam } from './seam.js';

/** The audit log on Kysely. */
export class KyselyAuditStore extends KyselySeam implements AuditStore {
  async appendAudit(rec: NewAuditRecord): Promise<void> {
    await this.db
      .insertInto('audit_log')
      .values({
        tenant_id: rec.tenant_id,
        at: rec.at,
        actor: rec.actor,
        action: rec.action,
        resource_type: rec.resource_type,
        resource_id: rec.resource_id,
        request_id: rec.request_id,
        payload_json: JSON.stringify(rec.payload),
      })
      .execute();
  }

  async listAudit(
    tenant_id: string,
    filter: { since?: number; action?: string },
    page: Page,
  ): Promise<AuditRecord[]> {
    let q = this.db.selectFrom('audit_log').selectAll().where('tenant_id', '=', tenant_id);
    if (filter.since !== undefined) q = q.where('at', '>=', filter.since);
    if (filter.action !== undefined) q = q.where('action', '=', filter.action);
    // Newest first; id breaks ties between events recorded in the same millisecond.
    const rows = await q
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map((r) => ({
      id: num(r.id),
      tenant_id: r.tenant_id,
      at: num(r.at),
      actor: r.actor,
      action: r.action,
      resource_type: r.resource_type,
      resource_id: r.resource_id,
      request_id: r.request_id,
      payload: JSON.parse(r.payload_json) as Record<string, unknown>,
    }));
  }
}
