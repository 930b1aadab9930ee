import type { TaskInstanceState } from '@leoflow/core';
import type { TaskInstanceHistoryRow, TaskInstanceRow } from '../types.js';
import type { LeaderFence } from './leader-fence.js';

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
    | 'executor'
    | 'decision'
  >
>;

/** One map index of a mapped task being expanded: its arguments (env name → value). */
export interface MappedInstance {
  map_value: Record<string, string>;
}

export interface TaskInstanceExpectation {
  /** the row must currently be in one of these states */
  states: readonly TaskInstanceState[];
  /** and, when given, carry this try number */
  try_number?: number;
  /** and, when given, this dispatch generation (the attempt's token carries it) */
  dispatch_gen?: number;
  /**
   * and, when given, the writer must still be the scheduler's leader: checked in the same
   * statement, so a deposed leader's claim does not apply (ports/leader-fence.ts)
   */
  leader?: LeaderFence;
}

/** What an agent write's fence compares, read fresh from the latest committed row. */
export interface AttemptFence {
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  map_index: number;
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
 * Task instances (one row per task of a run, the current try) and their archived tries.
 * Every mutation the scheduler races on is a compare-and-set that reports whether it applied.
 */
export interface TaskInstanceStore {
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
  /** The task instance (run, task, map index); map index -1 (the default) for an unmapped task. */
  getTaskInstance(
    dag_run_id: string,
    task_id: string,
    map_index?: number,
  ): Promise<TaskInstanceRow | undefined>;
  /**
   * Expands a mapped task (Airflow's expand): in one transaction, if the expectation holds
   * (leader fence included), its unexpanded row (map index -1) becomes map index 0 and rows
   * 1..n-1 are created, each `scheduled` with its arguments. A map index that existed before
   * (the task was cleared) continues its tries. False, and nothing written, when it did not hold.
   */
  expandTaskInstance(
    id: string,
    expect: TaskInstanceExpectation,
    indexes: readonly MappedInstance[],
    retries: number,
    now: number,
  ): Promise<boolean>;
  /**
   * Clears an expanded mapped task back to one unexpanded row (map index -1, state none, next
   * try), archiving every map index's current try to history, so the task expands afresh. False
   * (nothing written) when it has no map index or one is queued or running.
   */
  resetMappedTask(
    dag_run_id: string,
    task_id: string,
    retries: number,
    now: number,
  ): Promise<boolean>;
  getTaskInstanceById(id: string): Promise<TaskInstanceRow | undefined>;
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
  listTaskInstanceHistory(
    dag_run_id: string,
    task_id?: string,
    map_index?: number,
  ): Promise<TaskInstanceHistoryRow[]>;
  /**
   * What an agent write's fence needs of the task instance (its tenant, try, dispatch
   * generation, state and end), read fresh from the latest committed state; on SQLite through
   * the hot-read connection (one prepared point read) rather than a full row through Kysely.
   */
  getAttemptFence(id: string): Promise<AttemptFence | undefined>;
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
}
