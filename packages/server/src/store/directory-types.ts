/**
 * Row shapes of the directory: runners (with their token hashes), cells and tenant placements.
 * The directory is what the door reads, so nothing here is owned by a cell.
 */
export type RunnerKind = 'inbound' | 'ssh';

export interface RunnerSshTarget {
  host: string;
  port: number;
  user: string;
  /** id of a Connection in the tenant's vault (the cell holds the key; the machine holds none) */
  credential: string;
  /** pinned: a known_hosts line or an OpenSSH `SHA256:` fingerprint; never learned on first use */
  host_key: string;
}

export interface RunnerRecord {
  /** random, unique across tenants; what the door's per-connection secret is bound to */
  id: string;
  tenant_id: string;
  name: string;
  kind: RunnerKind;
  labels: Record<string, string>;
  capacity: number;
  ssh: RunnerSshTarget | null;
  /** SHA-256 hex of the inbound token; null for ssh runners */
  token_hash: string | null;
  /** the token sealed by the vault; null for ssh runners */
  token_cipher: Uint8Array | null;
  token_key_id: string | null;
  created_by: string;
  created_at: number;
}

/** What the door needs from a token: which runner, which tenant. Nothing secret. */
export interface RunnerIdentity {
  id: string;
  tenant_id: string;
  name: string;
  kind: RunnerKind;
}

export type CellState = 'active' | 'draining';

export interface CellRecord {
  name: string;
  /** the cell's internal base URL, as the door reaches it */
  url: string;
  state: CellState;
  created_at: number;
  updated_at: number;
}

export interface TenantPlacement {
  tenant_id: string;
  cell: string;
  placed_by: string;
  placed_at: number;
}
