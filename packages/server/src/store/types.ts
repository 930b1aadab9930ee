import type { BranchDecision, DagRunState, DagSpec, TaskInstanceState } from '@leoflow/core';

/**
 * Row shapes as the rest of the server sees them. All times are epoch milliseconds (numbers)
 * on both dialects; JSON columns are parsed. Every row carries its tenant.
 */
export interface DagRow {
  tenant_id: string;
  dag_id: string;
  current_version: number;
  is_paused: boolean;
  /** logical date (ms) of the newest scheduled run created, for the cron planner */
  last_scheduled_logical_date: number | null;
  created_at: number;
  updated_at: number;
  /** the file it was loaded from, relative to the DAGs folder; null when pushed by the API */
  source_file: string | null;
  /** false once its file is gone from the DAGs folder: no scheduled run until it is back */
  is_active: boolean;
}

/** One place a diagnostic points at (file:line:column), its stable code and what to do. */
export interface DagImportDiagnostic {
  code: string;
  message: string;
  file: string;
  line: number;
  column: number;
  /** the YAML path, like tasks[2].connections[0]; '' for the file as a whole */
  path: string;
  hint: string;
}

/** A DAG file in the DAGs folder that does not load (issue 40), until it loads or is removed. */
export interface DagImportErrorRow {
  tenant_id: string;
  /** relative to the DAGs folder */
  file: string;
  /** the DAG id when the file got as far as naming one */
  dag_id: string | null;
  diagnostics: DagImportDiagnostic[];
  first_seen_at: number;
  updated_at: number;
}

export interface DagVersionRow {
  tenant_id: string;
  dag_id: string;
  version: number;
  spec: DagSpec;
  spec_hash: string;
  created_at: number;
}

export type RunType = 'scheduled' | 'manual';

export interface DagRunRow {
  id: string;
  tenant_id: string;
  dag_id: string;
  run_id: string;
  dag_version: number;
  run_type: RunType;
  state: DagRunState;
  logical_date: number | null;
  data_interval_start: number | null;
  data_interval_end: number | null;
  conf: Record<string, unknown>;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
}

export interface TaskInstanceRow {
  id: string;
  tenant_id: string;
  dag_run_id: string; // DagRunRow.id
  dag_id: string;
  task_id: string;
  /**
   * Airflow's map index: -1 for a task that is not mapped, and for a mapped task before it is
   * expanded; 0..n-1 for its map indexes. (run, task, map index) is the task instance.
   */
  map_index: number;
  /** a map index's arguments (env name → value), fixed at expansion; null otherwise */
  map_value: Record<string, string> | null;
  /** a finished branch or short-circuit task's decision; null otherwise */
  decision: BranchDecision | null;
  try_number: number;
  max_tries: number;
  state: TaskInstanceState;
  queued_at: number | null;
  started_at: number | null;
  ended_at: number | null;
  last_heartbeat_at: number | null;
  /** when an up_for_retry row becomes schedulable again */
  retry_at: number | null;
  exit_code: number | null;
  error_message: string | null;
  hostname: string | null;
  pid: number | null;
  /** set by clear/timeout/terminate: the next heartbeat answers should_terminate */
  terminate_requested: boolean;
  updated_at: number;
  /**
   * Which dispatch of this try is the live one. Every claim (scheduled → queued) bumps it and
   * the attempt's token carries it; a claim reset to scheduled after a crash keeps its try, so a
   * late agent holding the old dispatch's token is refused by this, not by the try.
   */
  dispatch_gen: number;
  /**
   * The executor holding the current claim (its name), stamped at dispatch; null for a claim
   * made before claims recorded it, which belongs to the default executor.
   */
  executor: string | null;
}

export interface TaskInstanceHistoryRow {
  id: string;
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  map_index: number;
  try_number: number;
  state: TaskInstanceState;
  started_at: number | null;
  ended_at: number | null;
  exit_code: number | null;
  error_message: string | null;
  archived_at: number;
}

export interface XComRow {
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  /** -1 for a task that is not mapped; absent on a write means -1 */
  map_index?: number;
  key: string;
  value: Uint8Array;
  content_type: string;
  created_at: number;
}

export type LogStreamName = 'stdout' | 'stderr' | 'agent';

export interface LogLineRow {
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  /** -1 for a task that is not mapped; absent on a write means -1 */
  map_index?: number;
  try_number: number;
  line_number: number;
  time: number;
  stream: LogStreamName;
  message: string;
}

/** Identifies one attempt: the unit a credential is minted for. */
export interface AttemptKey {
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  /** -1 (or absent) for a task that is not mapped */
  map_index?: number;
  try_number: number;
}

export interface Page {
  limit: number;
  offset: number;
}

export interface TenantRow {
  id: string;
  name: string;
  created_at: number;
}

/** A minted user API token, by jti. The token string itself is never stored. */
export interface ApiTokenRow {
  jti: string;
  tenant_id: string;
  name: string;
  role: string;
  created_by: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  revoked_by: string | null;
}

/** A web app session (migration 0009): the cookie's digest and the API token it stands for. */
export interface UiSessionRow {
  /** SHA-256 (base64url) of the cookie value; the value itself is never stored */
  id_hash: string;
  tenant_id: string;
  /** the API token behind the session, by jti */
  token_jti: string;
  /** the token's subject and role when the session was opened (the token's record must still agree) */
  subject: string;
  role: string;
  created_at: number;
  /** epoch ms; never later than the token's own expiry */
  expires_at: number;
}

/** The identity part of an attempt record (from the attempt's verified credential). */
export interface AttemptRecordKey {
  tenant_id: string;
  task_instance_id: string;
  try_number: number;
  dag_id: string;
  dag_run_id: string;
  run_id: string;
  task_id: string;
  /** -1 (or absent) for a task that is not mapped */
  map_index?: number;
}

/**
 * What one attempt's credential was used for: names only, never values. `*_delivered` is null
 * until a delivery succeeded; `*_refusal` is the last refusal reason (not_live, revoked,
 * insecure_channel, declaration_unreadable) or null.
 */
export interface AttemptRecordRow extends AttemptRecordKey {
  map_index: number;
  session_hash: string | null;
  registered_at: number | null;
  scoping_mode: string | null;
  liveness_mode: string | null;
  variables_delivered: string[] | null;
  connections_delivered: string[] | null;
  variables_refusal: string | null;
  connections_refusal: string | null;
  renewals: number;
  last_renewed_at: number | null;
  /** why renewal stopped: ceiling | revoked | expired (null while it continues) */
  renewal_stopped: string | null;
  /** exp (ms) of the newest credential issued to the attempt */
  credential_exp: number | null;
  /** D5: names the task read through the SDK that its DAG did not declare (permissive only) */
  undeclared_reads: UndeclaredReads | null;
  /** when its credential was revoked (null: never) */
  credential_revoked_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface UndeclaredReads {
  variables: string[];
  connections: string[];
}

/** D5 per DAG: every undeclared name read, over all recorded attempts. */
export interface UndeclaredUseSummary {
  dag_id: string;
  variables: string[];
  connections: string[];
  attempts: number;
  last_seen: number;
}

export type AttemptSessionBinding = 'bound' | 'same' | 'conflict';

/** Why a warm-pool pod left its pool (migration 0010); null on a row while the pod serves. */
export type WarmPoolRecycleReason =
  'attempts' | 'lifetime' | 'idle' | 'survivor' | 'gone' | 'unacked';

/**
 * One warm-pool pod the pool created (migration 0010), keyed by its pod uid: the apiserver
 * never reuses a uid, so a pod re-created under the same name is never this row, and the
 * worker token names the uid. Shared by every replica: the one worker token per pod, the
 * attempt count and busy/idle survive a failover, and a recycled row refuses its token on every
 * replica at once.
 */
export interface WarmPoolMemberRow {
  pod_uid: string;
  pool_key: string;
  namespace: string;
  pod_name: string;
  tenant_id: string;
  /** epoch ms, by the creating replica's clock */
  created_at: number;
  /** its one worker token was minted */
  bootstrapped: boolean;
  /** attempts it took (acked) */
  attempts: number;
  busy: boolean;
  /** epoch ms: since when it has been idle (its creation before its first attempt) */
  idle_since: number;
  /** null while it serves; set before its pod is deleted, and never cleared */
  recycled: WarmPoolRecycleReason | null;
  /** epoch ms of the recycle (what the leader's prune of old rows goes by) */
  recycled_at: number | null;
}
