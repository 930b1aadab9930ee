import type { Page } from '../types.js';
import type { ConnectionRecord } from '../vault-types.js';

/** Connections (secret fields sealed). Scoped reads filter in the query, as for variables. */
export interface ConnectionStore {
  putConnection(rec: ConnectionRecord): Promise<void>;
  getConnection(tenant_id: string, conn_id: string): Promise<ConnectionRecord | undefined>;
  listConnections(tenant_id: string, page: Page): Promise<ConnectionRecord[]>;
  getConnectionsByIds(tenant_id: string, ids: readonly string[]): Promise<ConnectionRecord[]>;
  getAllConnections(tenant_id: string): Promise<ConnectionRecord[]>;
  countConnections(tenant_id: string): Promise<number>;
  deleteConnection(tenant_id: string, conn_id: string): Promise<boolean>;
  /** which of the given ids exist for the tenant (registration-time check) */
  existingConnectionIds(tenant_id: string, ids: readonly string[]): Promise<Set<string>>;
}
