import type { DagRunState } from '@leoflow/core';
import type { DagRunRow, Page, RunType } from '../types.js';
import type { LeaderFence } from './leader-fence.js';

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

/** DAG runs. Creating one also creates its task instances, in the same transaction. */
export interface RunStore {
  /**
   * Creates the run and its task instances atomically. Returns undefined when a run with that
   * (tenant, dag_id, run_id) already exists — creation is idempotent. For scheduled runs the
   * DAG's last_scheduled_logical_date advances in the same transaction.
   *
   * With a fence (the scheduler's planner), the transaction first checks that the fence still
   * holds and keeps it held until commit; when it does not, nothing is written and the result
   * is undefined too: a deposed leader's late run is not created.
   */
  createRun(run: NewRun, fence?: LeaderFence): Promise<DagRunRow | undefined>;
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
    /** the scheduler's moves carry its leader fence (a deposed leader's move changes nothing) */
    fence?: LeaderFence,
  ): Promise<boolean>;
  setRunVersion(id: string, dag_version: number): Promise<void>;
  /**
   * The data interval of the DAG's latest successful run whose logical date is before
   * `before` (Airflow's prev_data_interval_*_success); undefined when there is none.
   */
  previousSuccessInterval(
    tenant_id: string,
    dag_id: string,
    before: number,
  ): Promise<{ start: number | null; end: number | null } | undefined>;
}
