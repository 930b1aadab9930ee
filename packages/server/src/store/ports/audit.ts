import type { Page } from '../types.js';
import type { AuditRecord, NewAuditRecord } from '../vault-types.js';

/** The audit log: append-only, listed newest first. */
export interface AuditStore {
  appendAudit(rec: NewAuditRecord): Promise<void>;
  listAudit(
    tenant_id: string,
    filter: { since?: number; action?: string },
    page: Page,
  ): Promise<AuditRecord[]>;
}
