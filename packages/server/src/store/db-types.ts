import type { Generated } from 'kysely';
import type { ApiTokenRow, UiSessionRow, WarmPoolRecycleReason } from './types.js';

/**
 * Column-level shapes as the drivers hand them to Kysely. They differ from the row types in
 * types.ts where the dialects differ: booleans are INTEGER 0/1 on SQLite and BOOLEAN on
 * PostgreSQL, JSON is stored as TEXT, and blobs come back as Buffers.
 */

/** 0/1 on SQLite, true/false on PostgreSQL; always go through the store's bool helpers. */
export type DbBool = number | boolean;

export interface TenantsTable {
  id: string;
  name: string;
  created_at: number;
}

export interface DagsTable {
  tenant_id: string;
  dag_id: string;
  current_version: number;
  is_paused: DbBool;
  last_scheduled_logical_date: number | null;
  created_at: number;
  updated_at: number;
  /** the file it was loaded from, relative to the DAGs folder; null when pushed */
  source_file: string | null;
  is_active: Generated<DbBool>;
}

export interface DagImportErrorsTable {
  tenant_id: string;
  file: string;
  dag_id: string | null;
  diagnostics_json: string;
  first_seen_at: number;
  updated_at: number;
}

export interface DagVersionsTable {
  tenant_id: string;
  dag_id: string;
  version: number;
  spec_json: string;
  spec_hash: string;
  created_at: number;
}

export interface DagRunsTable {
  id: string;
  tenant_id: string;
  dag_id: string;
  run_id: string;
  dag_version: number;
  run_type: string;
  state: string;
  logical_date: number | null;
  data_interval_start: number | null;
  data_interval_end: number | null;
  conf_json: string;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
}

export interface TaskInstancesTable {
  id: string;
  tenant_id: string;
  dag_run_id: string;
  dag_id: string;
  task_id: string;
  try_number: number;
  max_tries: number;
  state: string;
  queued_at: number | null;
  started_at: number | null;
  ended_at: number | null;
  last_heartbeat_at: number | null;
  retry_at: number | null;
  exit_code: number | null;
  error_message: string | null;
  hostname: string | null;
  pid: number | null;
  terminate_requested: DbBool;
  updated_at: number;
  /** the try whose credential was revoked; revoked iff equal to try_number (migration 0002) */
  credential_revoked_try: number | null;
  /** which dispatch of the try holds the live credential (migration 0004; default 0) */
  dispatch_gen: Generated<number>;
  /** the executor holding the current claim (migration 0006; null before it) */
  executor: string | null;
  /**
   * The current try's renewals not yet folded into its attempt record (migration 0007): the
   * renewing heartbeat's own UPDATE counts them; the attempt record reads add them; the try
   * bump folds them in and zeroes them.
   */
  renewal_count: Generated<number>;
  /** when the newest of those renewals happened (ms) */
  renewed_at: number | null;
  /** the exp (ms) of the credential that renewal minted */
  renewed_credential_exp: number | null;
  /** the map index (migration 0015); -1 for a task that is not mapped (or not expanded yet) */
  map_index: Generated<number>;
  /** one map index's arguments, JSON {env name: value} (migration 0015) */
  map_value: string | null;
  /** a finished branch / short-circuit task's decision, JSON {followed, skipped} (migration 0015) */
  decision_json: string | null;
}

export interface TaskInstanceHistoryTable {
  id: string;
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  try_number: number;
  state: string;
  started_at: number | null;
  ended_at: number | null;
  exit_code: number | null;
  error_message: string | null;
  archived_at: number;
  /** migration 0015; -1 for a task that is not mapped */
  map_index: Generated<number>;
}

export interface XComTable {
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  /** migration 0015; -1 for a task that is not mapped */
  map_index: Generated<number>;
  key: string;
  value: Uint8Array;
  content_type: string;
  created_at: number;
}

export interface TaskLogsTable {
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  /** migration 0015; -1 for a task that is not mapped */
  map_index: Generated<number>;
  try_number: number;
  line_number: number;
  time: number;
  stream: string;
  message: string;
}

export interface VariablesTable {
  tenant_id: string;
  key: string;
  value_text: string | null;
  value_cipher: Uint8Array | null;
  key_id: string | null;
  is_secret: DbBool;
  description: string;
  /** JSON array of DAG id patterns that may declare it; null: every DAG (migration 0013) */
  dag_grants: string | null;
  created_at: number;
  updated_at: number;
}

export interface ConnectionsTable {
  tenant_id: string;
  conn_id: string;
  conn_type: string;
  host: string | null;
  login: string | null;
  schema: string | null;
  port: number | null;
  description: string;
  secret_cipher: Uint8Array | null;
  key_id: string | null;
  /** JSON array of DAG id patterns that may declare it; null: every DAG (migration 0013) */
  dag_grants: string | null;
  created_at: number;
  updated_at: number;
}

export interface AuditLogTable {
  id: Generated<number>;
  tenant_id: string;
  at: number;
  actor: string;
  action: string;
  resource_type: string;
  resource_id: string;
  request_id: string | null;
  payload_json: string;
}

/** Every column is a plain text or number on both dialects: the table is the row type. */
export type ApiTokensTable = ApiTokenRow;

/** Plain text and numbers too (migration 0009). */
export type UiSessionsTable = UiSessionRow;

/** Warm-pool members (migration 0010): booleans as DbBool, the rest plain. */
export interface WarmPoolMembersTable {
  pod_uid: string;
  pool_key: string;
  namespace: string;
  pod_name: string;
  tenant_id: string;
  created_at: number;
  bootstrapped: DbBool;
  attempts: number;
  busy: DbBool;
  idle_since: number;
  recycled: WarmPoolRecycleReason | null;
  recycled_at: number | null;
}

export interface AttemptRecordsTable {
  task_instance_id: string;
  try_number: number;
  tenant_id: string;
  dag_id: string;
  dag_run_id: string;
  run_id: string;
  task_id: string;
  /** migration 0015; -1 for a task that is not mapped */
  map_index: Generated<number>;
  session_hash: string | null;
  registered_at: number | null;
  scoping_mode: string | null;
  liveness_mode: string | null;
  /** JSON array of names */
  variables_delivered: string | null;
  connections_delivered: string | null;
  variables_refusal: string | null;
  connections_refusal: string | null;
  renewals: Generated<number>;
  last_renewed_at: number | null;
  renewal_stopped: string | null;
  credential_exp: number | null;
  undeclared_reads: string | null;
  /** the pod that exchanged its bootstrap credential for this attempt (migration 0011) */
  exchanged_pod_uid: string | null;
  exchanged_dispatch_gen: number | null;
  /** when the attempt's credential was revoked, whatever its state then (migration 0012) */
  credential_revoked_at: number | null;
  /** 1 when the registered agent masks delivered secrets in its output (migration 0014) */
  agent_masks_secrets: number | null;
  created_at: number;
  updated_at: number;
}

/** One row per lease (migration 0008); times are epoch ms on the database's clock. */
export interface SchedulerLeaseTable {
  name: string;
  /** the elector instance holding it (unique per process start) */
  holder: string;
  /** bumped on every acquisition; a fenced write must carry the current one */
  epoch: number;
  expires_at: number;
  renewed_at: number;
}

/**
 * Every term of a lease, as the database granted it (migration 0016): written by a trigger on
 * scheduler_lease in the same transaction as each acquire, renew and release, on PostgreSQL
 * only (Lite has no lease). `granted_at` is the database's clock when the term began;
 * `expires_at` the last expiry its holder was granted (a release sets it to the release time).
 * Nothing in the control plane reads it: it is the history a fault test checks (no two terms
 * overlap) and an operator reads after an incident.
 */
export interface SchedulerLeaseTermsTable {
  name: string;
  epoch: number;
  holder: string;
  granted_at: number;
  expires_at: number;
}

/**
 * The replicas that started on this database, and the agent URLs each hands its agents
 * (migration 0016). A replica writes its row at start and refreshes `seen_at` while it runs;
 * a replica that finds another, seen recently, advertising a different set of agent URLs warns
 * (docs/pro.md, "Agents follow the control plane").
 */
export interface ControlPlaneReplicasTable {
  /** unique per process start (host/pid/random) */
  instance: string;
  role: string;
  /** JSON array of the advertised agent URLs, sorted (a set: order is per replica) */
  agent_urls: string;
  started_at: number;
  seen_at: number;
}

/**
 * The directory (directory-migrations.ts): what the door reads before it may contact a cell.
 * Lite keeps it in the same SQLite file; Pro in a PostgreSQL schema of its own.
 */
export interface RunnersTable {
  id: string;
  tenant_id: string;
  name: string;
  kind: string;
  labels_json: string;
  capacity: number;
  ssh_host: string | null;
  ssh_port: number | null;
  ssh_user: string | null;
  ssh_credential: string | null;
  ssh_host_key: string | null;
  /** SHA-256 (hex) of an inbound runner's token; null for ssh runners */
  token_hash: string | null;
  /** the token sealed by the registering cell's vault (AAD binds it to tenant and runner id) */
  token_cipher: Uint8Array | null;
  token_key_id: string | null;
  created_by: string;
  created_at: number;
}

export interface CellsTable {
  name: string;
  url: string;
  state: string;
  created_at: number;
  updated_at: number;
}

export interface TenantPlacementsTable {
  tenant_id: string;
  cell: string;
  placed_by: string;
  placed_at: number;
}

export interface Database {
  tenants: TenantsTable;
  dags: DagsTable;
  dag_import_errors: DagImportErrorsTable;
  dag_versions: DagVersionsTable;
  dag_runs: DagRunsTable;
  task_instances: TaskInstancesTable;
  task_instance_history: TaskInstanceHistoryTable;
  xcom: XComTable;
  task_logs: TaskLogsTable;
  variables: VariablesTable;
  connections: ConnectionsTable;
  audit_log: AuditLogTable;
  api_tokens: ApiTokensTable;
  attempt_records: AttemptRecordsTable;
  scheduler_lease: SchedulerLeaseTable;
  scheduler_lease_terms: SchedulerLeaseTermsTable;
  control_plane_replicas: ControlPlaneReplicasTable;
  runners: RunnersTable;
  cells: CellsTable;
  tenant_placements: TenantPlacementsTable;
  ui_sessions: UiSessionsTable;
  warm_pool_members: WarmPoolMembersTable;
}
