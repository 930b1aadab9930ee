import type { DagRunState, DagSpec, TaskInstanceState } from '@leoflow/core';
import type {
  ApiTokenRow,
  AttemptRecordKey,
  AttemptRecordRow,
  AttemptSessionBinding,
  UndeclaredReads,
  UndeclaredUseSummary,
  DagRow,
  DagRunRow,
  DagVersionRow,
  LogLineRow,
  Page,
  RunType,
  TaskInstanceHistoryRow,
  TaskInstanceRow,
  TenantRow,
  XComRow,
} from './types.js';
import type { VaultStore } from './vault-store.js';

/** A run's owner and spec version: what secret delivery needs to find the declared names. */
export interface RunSpecRef {
  tenant_id: string;
  dag_id: string;
  dag_version: number;
}

export interface NewRun {
  tenant_id: string;
  dag_id: string;
  run_id: string;
  run_type: RunType;
  dag_version: number;
  logical_date: number | null;
  data_interval_start: number | null;
  data_interval_end: number | null;
  conf: Record<string, unknown>;
  /** one task instance per task, created in state `none`, try 1 */
  tasks: { task_id: string; max_tries: number }[];
  now: number;
}

/** Fields a compare-and-set on a task instance may write. */
export type TaskInstancePatch = Partial<
  Pick<
    TaskInstanceRow,
    | 'state'
    | 'queued_at'
    | 'started_at'
    | 'ended_at'
    | 'last_heartbeat_at'
    | 'retry_at'
    | 'exit_code'
    | 'error_message'
    | 'hostname'
    | 'pid'
    | 'terminate_requested'
    | 'max_tries'
    | 'dispatch_gen'
  >
>;

export interface TaskInstanceExpectation {
  /** the row must currently be in one of these states */
  states: readonly TaskInstanceState[];
  /** and, when given, carry this try number */
  try_number?: number;
  /** and, when given, this dispatch generation (the attempt's token carries it) */
  dispatch_gen?: number;
}

export interface AttemptFence {
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  try_number: number;
  dispatch_gen: number;
  state: TaskInstanceState;
  ended_at: number | null;
}

/** A credential minted for this heartbeat, to be recorded if the heartbeat hands it out. */
export interface HeartbeatRenewal {
  /** the new token's exp, in ms */
  credential_exp: number;
}

export type HeartbeatOutcome =
  | {
      kind: 'live';
      terminate_requested: boolean;
      /** this attempt's credential was revoked: answer the heartbeat but do not renew */
      credential_revoked: boolean;
    }
  /** no row with that try in queued/running: the attempt moved on */
  | { kind: 'stale' };

/**
 * The persistence port. One implementation (Kysely) serves SQLite and PostgreSQL; the same
 * storage suite runs against both. Every mutation that the scheduler races on is a
 * compare-and-set that reports whether it applied, so two writers can never both win.
 */
export interface Store extends VaultStore {
  readonly dialect: 'sqlite' | 'postgres';
  migrate(): Promise<void>;
  /**
   * Which migrations of this build the database has applied and which are still pending.
   * Read-only: it never creates the bookkeeping tables nor applies anything (`leoflow doctor`).
   */
  migrationStatus(): Promise<{ applied: string[]; pending: string[] }>;
  close(): Promise<void>;

  ensureTenant(tenant_id: string, name: string, now: number): Promise<void>;
  /** false when a tenant with that id already exists */
  createTenant(tenant: TenantRow): Promise<boolean>;
  getTenant(tenant_id: string): Promise<TenantRow | undefined>;
  listTenants(page: Page): Promise<TenantRow[]>;

  /** Records a minted user token (by jti; the token itself is never stored). */
  insertApiToken(row: ApiTokenRow): Promise<void>;
  /** Across tenants: authentication looks a verified token's jti up before trusting its tenant. */
  getApiToken(jti: string): Promise<ApiTokenRow | undefined>;
  listApiTokens(
    tenant_id: string,
    filter: { include_revoked?: boolean; name?: string },
    page: Page,
  ): Promise<ApiTokenRow[]>;
  /** Marks the tenant's token revoked; false when there is no such unrevoked token. */
  revokeApiToken(tenant_id: string, jti: string, by: string, now: number): Promise<boolean>;

  /**
   * Registers a DAG version. If the spec's hash equals the current version's, nothing is
   * written and the current version is returned with created=false.
   */
  putDagVersion(
    tenant_id: string,
    spec: DagSpec,
    spec_hash: string,
    now: number,
  ): Promise<{ version: number; created: boolean }>;
  getDag(tenant_id: string, dag_id: string): Promise<DagRow | undefined>;
  listDags(tenant_id: string, page: Page): Promise<DagRow[]>;
  /** every unpaused DAG of every tenant (the cron planner's input) */
  listSchedulableDags(): Promise<DagRow[]>;
  getDagVersion(
    tenant_id: string,
    dag_id: string,
    version: number,
  ): Promise<DagVersionRow | undefined>;
  listDagVersions(tenant_id: string, dag_id: string): Promise<Omit<DagVersionRow, 'spec'>[]>;
  setDagPaused(tenant_id: string, dag_id: string, paused: boolean, now: number): Promise<boolean>;

  /**
   * Creates the run and its task instances atomically. Returns undefined when a run with that
   * (tenant, dag_id, run_id) already exists — creation is idempotent. For scheduled runs the
   * DAG's last_scheduled_logical_date advances in the same transaction.
   */
  createRun(run: NewRun): Promise<DagRunRow | undefined>;
  getRunById(id: string): Promise<DagRunRow | undefined>;
  /**
   * getRunById narrowed to what the agent secret path needs (no conf, no dates), read fresh
   * from committed data like every other read; undefined when there is no such run.
   */
  getRunSpecRef(id: string): Promise<RunSpecRef | undefined>;
  getRun(tenant_id: string, dag_id: string, run_id: string): Promise<DagRunRow | undefined>;
  listRuns(
    tenant_id: string,
    filter: { dag_id?: string; state?: DagRunState; run_id?: string },
    page: Page,
  ): Promise<DagRunRow[]>;
  /** across tenants, oldest first (scheduler input) */
  listRunsInStates(states: readonly DagRunState[]): Promise<DagRunRow[]>;
  countRunsInStates(
    tenant_id: string,
    dag_id: string,
    states: readonly DagRunState[],
  ): Promise<number>;
  /** CAS on the run's state; sets started_at/ended_at when given */
  setRunState(
    id: string,
    from: readonly DagRunState[],
    to: DagRunState,
    times: { started_at?: number | null; ended_at?: number | null },
  ): Promise<boolean>;
  setRunVersion(id: string, dag_version: number): Promise<void>;

  listTaskInstances(dag_run_id: string): Promise<TaskInstanceRow[]>;
  /** The task instances of several runs in one query (the grid). */
  listTaskInstancesOfRuns(dag_run_ids: readonly string[]): Promise<TaskInstanceRow[]>;
  /**
   * Adds task instances (state `none`, try 1) for tasks the run does not have yet — a cleared
   * old run rebound to a newer DAG version may have gained tasks. Existing rows are left
   * untouched. Returns the task_ids it created; throws if the run does not exist.
   */
  ensureTaskInstances(
    dag_run_id: string,
    tasks: { task_id: string; max_tries: number }[],
    now: number,
  ): Promise<string[]>;
  getTaskInstance(dag_run_id: string, task_id: string): Promise<TaskInstanceRow | undefined>;
  getTaskInstanceById(id: string): Promise<TaskInstanceRow | undefined>;
  /**
   * What an agent write's fence needs of the task instance (its tenant, try, dispatch
   * generation, state and end), read fresh from the latest committed state; on SQLite through
   * the hot-read connection (one prepared point read) rather than a full row through Kysely.
   */
  getAttemptFence(id: string): Promise<AttemptFence | undefined>;
  /** across tenants */
  listTaskInstancesInStates(
    states: readonly TaskInstanceState[],
    limit: number,
  ): Promise<TaskInstanceRow[]>;
  countTaskInstancesInStates(
    tenant_id: string,
    dag_id: string,
    states: readonly TaskInstanceState[],
  ): Promise<number>;
  /** Applies the patch only if the expectation holds; true when a row changed. */
  updateTaskInstance(
    id: string,
    expect: TaskInstanceExpectation,
    patch: TaskInstancePatch,
    now: number,
  ): Promise<boolean>;
  /**
   * In one transaction, if the expectation holds: copy the row to task_instance_history (with
   * `archived_state` as its state), then bump try_number by one and apply the patch.
   * Used by retry and clear. True when it applied.
   */
  archiveAndBumpTry(
    id: string,
    expect: TaskInstanceExpectation,
    archived_state: TaskInstanceState,
    patch: TaskInstancePatch,
    now: number,
  ): Promise<boolean>;
  listTaskInstanceHistory(dag_run_id: string, task_id?: string): Promise<TaskInstanceHistoryRow[]>;
  /**
   * UPDATE last_heartbeat_at where (id, try) matches — and the dispatch generation, when given —
   * and state is queued|running. With `renewal`, the same statement records the renewal on the
   * row, where the attempt record's reads find it (renewals + 1, last_renewed_at = now,
   * credential_exp), exactly when the outcome is live, not terminate_requested and not
   * credential_revoked — the cases in which the caller hands the renewed token out.
   */
  recordHeartbeat(
    id: string,
    try_number: number,
    now: number,
    dispatch_gen?: number,
    renewal?: HeartbeatRenewal,
  ): Promise<HeartbeatOutcome>;

  /**
   * Creates the attempt's record if it has none (idempotent): `credential_exp` (ms) is the exp of
   * the credential it registered with, kept when the record already exists.
   */
  ensureAttemptRecord(key: AttemptRecordKey, now: number, credential_exp: number): Promise<void>;
  /**
   * Binds the agent session (SHA-256 of its key) once: 'bound' the first time, 'same' when the
   * same hash is presented again, 'conflict' when another session is already bound.
   */
  bindAttemptSession(
    task_instance_id: string,
    try_number: number,
    session_hash: string,
    now: number,
  ): Promise<AttemptSessionBinding>;
  getAttemptRecord(
    task_instance_id: string,
    try_number: number,
  ): Promise<AttemptRecordRow | undefined>;
  listAttemptRecords(dag_run_id: string, task_id?: string): Promise<AttemptRecordRow[]>;
  /** A delivery (names, never values) or a refusal of one kind, with the modes in force. */
  noteAttemptDelivery(
    task_instance_id: string,
    try_number: number,
    kind: 'variables' | 'connections',
    outcome: { names: string[] } | { refusal: string },
    modes: { scoping: string; liveness: string },
    now: number,
  ): Promise<void>;
  /** A renewal (new exp, renewals + 1) or a stop (reason; renewals unchanged). */
  noteAttemptRenewal(
    task_instance_id: string,
    try_number: number,
    outcome: { exp: number } | { stopped: string },
    now: number,
  ): Promise<void>;
  /** D5: records the undeclared reads once per attempt; false when already recorded. */
  noteUndeclaredReads(
    task_instance_id: string,
    try_number: number,
    reads: UndeclaredReads,
    now: number,
  ): Promise<boolean>;
  /** D5 summary per DAG of one tenant (optionally one DAG), from the attempt records. */
  summarizeUndeclaredUse(tenant_id: string, dag_id?: string): Promise<UndeclaredUseSummary[]>;

  putXCom(row: XComRow): Promise<void>;
  /**
   * The PushXCom fence: writes only while (task_instance_id, try_number) is the live try
   * (queued|running), checked in the same transaction as the write; false when it is not.
   */
  putXComIfLive(row: XComRow, task_instance_id: string, try_number: number): Promise<boolean>;
  getXCom(dag_run_id: string, task_id: string, key: string): Promise<XComRow | undefined>;
  listXComs(dag_run_id: string, task_id?: string): Promise<XComRow[]>;

  /** Idempotent: a line already stored (same attempt and line_number) is ignored. */
  appendLogs(lines: LogLineRow[]): Promise<void>;
  readLogs(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    after_line: number,
    limit: number,
  ): Promise<LogLineRow[]>;
  /** Inserts the line or replaces the message and time of the one stored at its line_number. */
  putLogLine(line: LogLineRow): Promise<void>;
  /** UTF-8 bytes of the attempt's stored messages, not counting the line at `except_line`. */
  logBytes(
    dag_run_id: string,
    task_id: string,
    try_number: number,
    except_line: number,
  ): Promise<number>;
}
