/**
 * Persistence shapes of the credential plane. Secret material is stored only as ciphertext
 * (`*_cipher`, AES-256-GCM envelope produced by the vault) with the id of the key that sealed it;
 * the store never sees plaintext secrets.
 */
export interface VariableRecord {
  tenant_id: string;
  key: string;
  /** plaintext value of a non-secret variable; null when is_secret */
  value_text: string | null;
  /** sealed value of a secret variable; null when not secret */
  value_cipher: Uint8Array | null;
  key_id: string | null;
  is_secret: boolean;
  description: string;
  /**
   * The DAG id patterns that may declare it (null: every DAG). Read from the store; a write of
   * the record leaves it as it is (grants change only through SecretGrantStore).
   */
  dag_grants?: readonly string[] | null;
  created_at: number;
  updated_at: number;
}

export interface ConnectionRecord {
  tenant_id: string;
  conn_id: string;
  conn_type: string;
  host: string | null;
  login: string | null;
  schema: string | null;
  port: number | null;
  description: string;
  /** sealed JSON {password: string|null, extra: object|null}; null when the connection has neither */
  secret_cipher: Uint8Array | null;
  key_id: string | null;
  /** as VariableRecord.dag_grants */
  dag_grants?: readonly string[] | null;
  created_at: number;
  updated_at: number;
}

/**
 * What the vault keyring seals, and so what key rotation re-encrypts: secret variables and
 * connections (in a cell's store) and inbound runners' tokens (in the directory).
 */
export type SealedKind = 'variable' | 'connection' | 'runner_token';

/** One sealed value, for key rotation. */
export interface SealedRef {
  kind: SealedKind;
  tenant_id: string;
  /** variable key, connection id or runner id (what the AAD binds the ciphertext to) */
  id: string;
  key_id: string;
  cipher: Uint8Array;
}

export interface AuditRecord {
  id: number;
  tenant_id: string;
  at: number;
  /** who: "user:<sub>", "agent:<task_instance_id>#<try>", "system" */
  actor: string;
  /** e.g. connection.set, secret.scope_warning, secret.liveness_denied */
  action: string;
  resource_type: string;
  resource_id: string;
  request_id: string | null;
  /** structured details; NEVER secret values (and for secret.* events, never names either) */
  payload: Record<string, unknown>;
}

export type NewAuditRecord = Omit<AuditRecord, 'id'>;
