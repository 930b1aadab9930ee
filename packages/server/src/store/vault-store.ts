import type {
  AuditRecord,
  ConnectionRecord,
  NewAuditRecord,
  SealedKind,
  SealedRef,
  VariableRecord,
} from './vault-types.js';
import type { Page } from './types.js';

/**
 * Variables, Connections, the audit log and attempt-credential revocation. Scoped reads take
 * the declared names and filter in the query (never fetch-all-then-filter), so undeclared
 * ciphertext never even leaves the database.
 */
export interface VaultStore {
  putVariable(rec: VariableRecord): Promise<void>;
  getVariable(tenant_id: string, key: string): Promise<VariableRecord | undefined>;
  listVariables(tenant_id: string, page: Page): Promise<VariableRecord[]>;
  /** exactly the named keys that exist (any order); empty input → [] without a query */
  getVariablesByKeys(tenant_id: string, keys: readonly string[]): Promise<VariableRecord[]>;
  /** the whole tenant vault (permissive / off delivery) */
  getAllVariables(tenant_id: string): Promise<VariableRecord[]>;
  countVariables(tenant_id: string): Promise<number>;
  deleteVariable(tenant_id: string, key: string): Promise<boolean>;

  putConnection(rec: ConnectionRecord): Promise<void>;
  getConnection(tenant_id: string, conn_id: string): Promise<ConnectionRecord | undefined>;
  listConnections(tenant_id: string, page: Page): Promise<ConnectionRecord[]>;
  getConnectionsByIds(tenant_id: string, ids: readonly string[]): Promise<ConnectionRecord[]>;
  getAllConnections(tenant_id: string): Promise<ConnectionRecord[]>;
  countConnections(tenant_id: string): Promise<number>;
  deleteConnection(tenant_id: string, conn_id: string): Promise<boolean>;

  /** which of the given names exist for the tenant (registration-time check) */
  existingVariableKeys(tenant_id: string, keys: readonly string[]): Promise<Set<string>>;
  existingConnectionIds(tenant_id: string, ids: readonly string[]): Promise<Set<string>>;

  /** sealed values not under `key_id`, across tenants, for online re-encryption (batch) */
  listSealedNotUnderKey(key_id: string, limit: number): Promise<SealedRef[]>;
  /** CAS: replace the ciphertext only if it is still sealed under `expect_key_id` */
  resealValue(
    kind: SealedKind,
    tenant_id: string,
    id: string,
    expect_key_id: string,
    cipher: Uint8Array,
    new_key_id: string,
    now: number,
  ): Promise<boolean>;

  /**
   * Stricter CAS used by key rotation: replaces the ciphertext only if the row still holds
   * exactly `ref.cipher` under `ref.key_id`. Guarding on the key id alone would let a rotation
   * overwrite a newer value written by a replica that still seals with the old key.
   */
  resealIfUnchanged(
    ref: SealedRef,
    cipher: Uint8Array,
    new_key_id: string,
    now: number,
  ): Promise<boolean>;
  /** how many sealed values (variables + connections, all tenants) each key id holds */
  countSealedByKeyId(): Promise<Map<string, number>>;

  appendAudit(rec: NewAuditRecord): Promise<void>;
  listAudit(
    tenant_id: string,
    filter: { since?: number; action?: string },
    page: Page,
  ): Promise<AuditRecord[]>;

  /** Marks one attempt's credential revoked (a column on the task instance, reset by retry/clear). */
  revokeAttemptCredential(
    task_instance_id: string,
    try_number: number,
    now: number,
  ): Promise<boolean>;
  /**
   * IsTaskInstanceLive + revocation in one indexed read: the row for (dag_run_id, task_id) exists,
   * carries try_number, and is queued|running. Nothing else — no recency, run-state or date term.
   */
  getAttemptLiveness(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    /** when given, the row must also be on this dispatch of the try (a reset claim moved on) */
    dispatch_gen?: number,
  ): Promise<{ live: boolean; revoked: boolean }>;
}
