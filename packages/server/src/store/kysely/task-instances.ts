import { randomUUID } from 'node:crypto';
import { ACTIVE_STATES, type BranchDecision, type TaskInstanceState } from '@leoflow/core';
import { sql, type Insertable, type Selectable, type Updateable } from 'kysely';
import type { TaskInstanceHistoryTable, TaskInstancesTable } from '../db-types.js';
import type { StoreDialect } from '../migrations.js';
import type {
  AttemptFence,
  MappedInstance,
  HeartbeatOutcome,
  HeartbeatRenewal,
  TaskInstanceExpectation,
  TaskInstancePatch,
  TaskInstanceStore,
} from '../ports/task-instances.js';
import { TASK_INSTANCE_RESET } from '../task-instance-reset.js';
import type { TaskInstanceHistoryRow, TaskInstanceRow } from '../types.js';
import { chunks, INSERT_CHUNK } from './chunks.js';
import { changed, fromBool, num, numOrNull } from './columns.js';
import { leaderFenceHolds } from './leader-fence.js';
import { KyselySeam, dbBool } from './seam.js';

const PATCHABLE_KEYS = [
  'state',
  'queued_at',
  'started_at',
  'ended_at',
  'last_heartbeat_at',
  'retry_at',
  'exit_code',
  'error_message',
  'hostname',
  'pid',
  'terminate_requested',
  'max_tries',
  'dispatch_gen',
  'executor',
] as const satisfies readonly (keyof TaskInstancePatch)[];
// `decision` is patchable too, written as decision_json (see #patchColumns).

/** Task instances and their history on Kysely. */
export class KyselyTaskInstanceStore extends KyselySeam implements TaskInstanceStore {
  async listTaskInstances(dag_run_id: string): Promise<TaskInstanceRow[]> {
    const rows = await this.db
      .selectFrom('task_instances')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id)
      .orderBy('task_id')
      .execute();
    // map indexes in order (sorted here, not in SQL, so a store short of migration 0015 reads)
    return rows.map(toTaskInstanceRow).sort(byTaskThenIndex);
  }

  async listTaskInstancesOfRuns(dag_run_ids: readonly string[]): Promise<TaskInstanceRow[]> {
    if (dag_run_ids.length === 0) return [];
    const rows = await this.db
      .selectFrom('task_instances')
      .selectAll()
      .where('dag_run_id', 'in', [...dag_run_ids])
      .orderBy('task_id')
      .execute();
    return rows.map(toTaskInstanceRow).sort(byTaskThenIndex);
  }

  async ensureTaskInstances(
    dag_run_id: string,
    tasks: { task_id: string; max_tries: number }[],
    now: number,
  ): Promise<string[]> {
    return this.writeTx(async (tx) => {
      const run = await tx
        .selectFrom('dag_runs')
        .select(['tenant_id', 'dag_id'])
        .where('id', '=', dag_run_id)
        .executeTakeFirst();
      if (run === undefined) throw new Error(`dag run ${dag_run_id} does not exist`);
      // A task with any row (a mapped task's map indexes included) has its instances already.
      const present = new Set(
        (
          await tx
            .selectFrom('task_instances')
            .select('task_id')
            .distinct()
            .where('dag_run_id', '=', dag_run_id)
            .execute()
        ).map((r) => r.task_id),
      );
      const created: string[] = [];
      const rows = tasks
        .filter((t) => !present.has(t.task_id))
        .map((t) => newTaskInstance(this.dialect, run.tenant_id, run.dag_id, dag_run_id, t, now));
      for (const chunk of chunks(rows, INSERT_CHUNK)) {
        const inserted = await tx
          .insertInto('task_instances')
          .values(chunk)
          .onConflict((oc) => oc.columns(['dag_run_id', 'task_id', 'map_index']).doNothing())
          .returning('task_id')
          .execute();
        created.push(...inserted.map((r) => r.task_id));
      }
      return created;
    });
  }

  async getTaskInstance(
    dag_run_id: string,
    task_id: string,
    map_index = -1,
  ): Promise<TaskInstanceRow | undefined> {
    const row = await this.db
      .selectFrom('task_instances')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('map_index', '=', map_index)
      .executeTakeFirst();
    return row && toTaskInstanceRow(row);
  }

  async expandTaskInstance(
    id: string,
    expect: TaskInstanceExpectation,
    indexes: readonly MappedInstance[],
    retries: number,
    now: number,
  ): Promise<boolean> {
    if (indexes.length === 0 || expect.states.length === 0) return false;
    return this.writeTx(async (tx) => {
      // Index 0 is the unexpanded row itself (Airflow turns the unmapped instance into index 0),
      // under the leader fence: a deposed leader expands nothing.
      let q = tx
        .updateTable('task_instances')
        .set((eb) => ({
          map_index: 0,
          state: 'scheduled',
          map_value: JSON.stringify(indexes[0]!.map_value),
          max_tries: eb('try_number', '+', retries),
          updated_at: now,
        }))
        .where('id', '=', id)
        .where('map_index', '=', -1)
        .where('state', 'in', expect.states);
      if (expect.try_number !== undefined) q = q.where('try_number', '=', expect.try_number);
      const fenceHolds = leaderFenceHolds(this.dialect, expect.leader);
      if (fenceHolds !== undefined) q = q.where(fenceHolds);
      if (!changed((await q.executeTakeFirst()).numUpdatedRows)) return false;
      const first = await tx
        .selectFrom('task_instances')
        .select(['tenant_id', 'dag_id', 'dag_run_id', 'task_id'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      // A map index that existed in an earlier expansion (the task was cleared) continues its
      // tries, so its history keeps one row per (index, try).
      const earlier = new Map(
        (
          await tx
            .selectFrom('task_instance_history')
            .select(['map_index', (eb) => eb.fn.max('try_number').as('max_try')])
            .where('dag_run_id', '=', first.dag_run_id)
            .where('task_id', '=', first.task_id)
            .groupBy('map_index')
            .execute()
        ).map((r) => [Number(r.map_index), Number(r.max_try)]),
      );
      const rows = indexes.slice(1).map((m, k) => {
        const mapIndex = k + 1;
        const tryNumber = (earlier.get(mapIndex) ?? 0) + 1;
        return {
          ...newTaskInstance(
            this.dialect,
            first.tenant_id,
            first.dag_id,
            first.dag_run_id,
            { task_id: first.task_id, max_tries: tryNumber + retries },
            now,
          ),
          try_number: tryNumber,
          state: 'scheduled',
          map_index: mapIndex,
          map_value: JSON.stringify(m.map_value),
        };
      });
      for (const chunk of chunks(rows, INSERT_CHUNK)) {
        await tx.insertInto('task_instances').values(chunk).execute();
      }
      return true;
    });
  }

  async resetMappedTask(
    dag_run_id: string,
    task_id: string,
    retries: number,
    now: number,
  ): Promise<boolean> {
    return this.writeTx(async (tx) => {
      let q = tx
        .selectFrom('task_instances')
        .selectAll()
        .where('dag_run_id', '=', dag_run_id)
        .where('task_id', '=', task_id)
        .where('map_index', '>=', 0)
        .orderBy('map_index');
      if (this.dialect === 'postgres') q = q.forUpdate();
      const rows = await q.execute();
      if (rows.length === 0) return false;
      // Refused while any index is queued or running: the caller asked first, this is the fence.
      if (rows.some((r) => ACTIVE_STATES.includes(r.state as (typeof ACTIVE_STATES)[number]))) {
        return false;
      }
      for (const r of rows) {
        await tx
          .insertInto('task_instance_history')
          .values(historyOf(r, r.state, now))
          .execute();
      }
      await tx
        .deleteFrom('task_instances')
        .where('dag_run_id', '=', dag_run_id)
        .where('task_id', '=', task_id)
        .where('map_index', '>=', 1)
        .execute();
      const zero = rows[0]!;
      const tryNumber = zero.try_number + 1;
      await tx
        .updateTable('task_instances')
        .set({
          ...this.#patchColumns({
            ...TASK_INSTANCE_RESET,
            state: 'none',
            retry_at: null,
            exit_code: null,
            error_message: null,
            decision: null,
            max_tries: tryNumber + retries,
          }),
          map_index: -1,
          map_value: null,
          try_number: tryNumber,
          renewal_count: 0,
          renewed_at: null,
          renewed_credential_exp: null,
          updated_at: now,
        })
        .where('id', '=', zero.id)
        .execute();
      return true;
    });
  }

  async getTaskInstanceById(id: string): Promise<TaskInstanceRow | undefined> {
    const row = await this.db
      .selectFrom('task_instances')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toTaskInstanceRow(row);
  }

  async listTaskInstancesInStates(
    states: readonly TaskInstanceState[],
    limit: number,
  ): Promise<TaskInstanceRow[]> {
    if (states.length === 0 || limit <= 0) return [];
    const rows = await this.db
      .selectFrom('task_instances')
      .selectAll()
      .where('state', 'in', states)
      // Longest-waiting first, so a busy tenant cannot starve rows that changed earlier; a mapped
      // task's indexes (one expansion, one updated_at) in map-index order.
      .orderBy('updated_at')
      .orderBy('map_index')
      .orderBy('id')
      .limit(limit)
      .execute();
    return rows.map(toTaskInstanceRow);
  }

  async countTaskInstancesInStates(
    tenant_id: string,
    dag_id: string,
    states: readonly TaskInstanceState[],
  ): Promise<number> {
    if (states.length === 0) return 0;
    const row = await this.db
      .selectFrom('task_instances')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('state', 'in', states)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async updateTaskInstance(
    id: string,
    expect: TaskInstanceExpectation,
    patch: TaskInstancePatch,
    now: number,
  ): Promise<boolean> {
    if (expect.states.length === 0) return false;
    let q = this.db
      .updateTable('task_instances')
      .set({ ...this.#patchColumns(patch), updated_at: now })
      .where('id', '=', id)
      .where('state', 'in', expect.states);
    if (expect.try_number !== undefined) q = q.where('try_number', '=', expect.try_number);
    if (expect.dispatch_gen !== undefined) q = q.where('dispatch_gen', '=', expect.dispatch_gen);
    const fenceHolds = leaderFenceHolds(this.dialect, expect.leader);
    if (fenceHolds !== undefined) q = q.where(fenceHolds);
    const res = await q.executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async getAttemptFence(id: string): Promise<AttemptFence | undefined> {
    if (this.hot !== undefined) return this.hot.attemptFence(id);
    const row = await this.db
      .selectFrom('task_instances')
      .select([
        'tenant_id',
        'dag_run_id',
        'task_id',
        'map_index',
        'try_number',
        'dispatch_gen',
        'state',
        'ended_at',
      ])
      .where('id', '=', id)
      .executeTakeFirst();
    return (
      row && {
        tenant_id: row.tenant_id,
        dag_run_id: row.dag_run_id,
        task_id: row.task_id,
        map_index: Number(row.map_index ?? -1),
        try_number: row.try_number,
        dispatch_gen: Number(row.dispatch_gen),
        state: row.state as TaskInstanceState,
        ended_at: numOrNull(row.ended_at),
      }
    );
  }

  async archiveAndBumpTry(
    id: string,
    expect: TaskInstanceExpectation,
    archived_state: TaskInstanceState,
    patch: TaskInstancePatch,
    now: number,
  ): Promise<boolean> {
    if (expect.states.length === 0) return false;
    if (expect.leader !== undefined) {
      // Retry and clear are not the scheduler's work-creating writes; a fence here would be
      // silently ignored, so it is refused instead.
      throw new Error('archiveAndBumpTry takes no leader fence');
    }
    return this.writeTx(async (tx) => {
      // The pre-image is what goes to history. On PostgreSQL the row lock makes a concurrent
      // caller wait here and then re-read the bumped row, so its guarded UPDATE below misses.
      let pre = tx.selectFrom('task_instances').selectAll().where('id', '=', id);
      if (this.dialect === 'postgres') pre = pre.forUpdate();
      const before = await pre.executeTakeFirst();
      if (before === undefined) return false;

      let q = tx
        .updateTable('task_instances')
        .set((eb) => ({
          ...this.#patchColumns(patch),
          try_number: eb('try_number', '+', 1),
          // the archived try's renewals move to its attempt record below
          renewal_count: 0,
          renewed_at: null,
          renewed_credential_exp: null,
          updated_at: now,
        }))
        .where('id', '=', id)
        .where('state', 'in', expect.states)
        // Pins the update to the exact attempt we are about to archive.
        .where('try_number', '=', before.try_number);
      if (expect.try_number !== undefined) q = q.where('try_number', '=', expect.try_number);
      if (expect.dispatch_gen !== undefined) q = q.where('dispatch_gen', '=', expect.dispatch_gen);
      const res = await q.executeTakeFirst();
      if (!changed(res.numUpdatedRows)) return false;

      const pending = num(before.renewal_count ?? 0);
      if (pending > 0) {
        await tx
          .updateTable('attempt_records')
          .set((eb) => ({
            renewals: eb('renewals', '+', pending),
            last_renewed_at: before.renewed_at,
            credential_exp: before.renewed_credential_exp,
            updated_at: sql`case when updated_at > ${before.renewed_at} then updated_at else ${before.renewed_at} end`,
          }))
          .where('task_instance_id', '=', id)
          .where('try_number', '=', before.try_number)
          .execute();
      }

      await tx
        .insertInto('task_instance_history')
        .values(historyOf(before, archived_state, now))
        .execute();
      return true;
    });
  }

  async listTaskInstanceHistory(
    dag_run_id: string,
    task_id?: string,
    map_index?: number,
  ): Promise<TaskInstanceHistoryRow[]> {
    let q = this.db
      .selectFrom('task_instance_history')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id);
    if (task_id !== undefined) q = q.where('task_id', '=', task_id);
    if (map_index !== undefined) q = q.where('map_index', '=', map_index);
    const rows = await q.orderBy('task_id').orderBy('map_index').orderBy('try_number').execute();
    return rows.map(toHistoryRow);
  }

  async recordHeartbeat(
    id: string,
    try_number: number,
    now: number,
    dispatch_gen?: number,
    renewal?: HeartbeatRenewal,
  ): Promise<HeartbeatOutcome> {
    // updated_at is left alone: it orders the scheduler's work queue, and a heartbeat is not
    // a state change.
    let q = this.db.updateTable('task_instances').set({ last_heartbeat_at: now });
    if (renewal !== undefined) {
      // The renewal counts only where the caller will hand the token out: neither a requested
      // termination nor this try's revoked credential is renewed. It is kept on this row (one
      // statement, one page), and read into the attempt record (attempt-records.ts).
      const renews = sql<boolean>`(terminate_requested = ${this.bool(false)} and (credential_revoked_try is null or credential_revoked_try <> ${try_number}))`;
      q = q.set({
        renewal_count: sql`renewal_count + case when ${renews} then 1 else 0 end`,
        renewed_at: sql`case when ${renews} then ${now} else renewed_at end`,
        renewed_credential_exp: sql`case when ${renews} then ${renewal.credential_exp} else renewed_credential_exp end`,
      });
    }
    q = q
      .where('id', '=', id)
      .where('try_number', '=', try_number)
      .where('state', 'in', ACTIVE_STATES);
    if (dispatch_gen !== undefined) q = q.where('dispatch_gen', '=', dispatch_gen);
    const row = await q
      .returning(['terminate_requested', 'credential_revoked_try'])
      .executeTakeFirst();
    if (row === undefined) return { kind: 'stale' };
    return {
      kind: 'live',
      terminate_requested: fromBool(row.terminate_requested),
      credential_revoked: row.credential_revoked_try === try_number,
    };
  }

  #patchColumns(patch: TaskInstancePatch): Updateable<TaskInstancesTable> {
    // Copy only the patchable keys: a caller spreading a whole row into the patch must not be
    // able to rewrite try_number, ids or the tenant.
    const out: Record<string, unknown> = {};
    for (const key of PATCHABLE_KEYS) {
      const v = patch[key];
      if (v === undefined) continue;
      out[key] = typeof v === 'boolean' ? this.bool(v) : v;
    }
    if (patch.decision !== undefined) {
      out.decision_json = patch.decision === null ? null : JSON.stringify(patch.decision);
    }
    return out;
  }
}

function toTaskInstanceRow(r: Selectable<TaskInstancesTable>): TaskInstanceRow {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    dag_run_id: r.dag_run_id,
    dag_id: r.dag_id,
    task_id: r.task_id,
    // Absent short of migration 0015: not mapped.
    map_index: Number(r.map_index ?? -1),
    map_value: r.map_value ? (JSON.parse(r.map_value) as Record<string, string>) : null,
    decision: r.decision_json ? (JSON.parse(r.decision_json) as BranchDecision) : null,
    try_number: r.try_number,
    max_tries: r.max_tries,
    state: r.state as TaskInstanceState,
    queued_at: numOrNull(r.queued_at),
    started_at: numOrNull(r.started_at),
    ended_at: numOrNull(r.ended_at),
    last_heartbeat_at: numOrNull(r.last_heartbeat_at),
    retry_at: numOrNull(r.retry_at),
    exit_code: r.exit_code,
    error_message: r.error_message,
    hostname: r.hostname,
    pid: r.pid,
    terminate_requested: fromBool(r.terminate_requested),
    updated_at: num(r.updated_at),
    // Absent on a database still short of migration 0004 (an upgrade in progress): 0.
    dispatch_gen: Number(r.dispatch_gen ?? 0),
    // Absent short of migration 0006: the default executor's claim.
    executor: r.executor ?? null,
  };
}

function toHistoryRow(r: Selectable<TaskInstanceHistoryTable>): TaskInstanceHistoryRow {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    dag_run_id: r.dag_run_id,
    task_id: r.task_id,
    map_index: Number(r.map_index ?? -1),
    try_number: r.try_number,
    state: r.state as TaskInstanceState,
    started_at: numOrNull(r.started_at),
    ended_at: numOrNull(r.ended_at),
    exit_code: r.exit_code,
    error_message: r.error_message,
    archived_at: num(r.archived_at),
  };
}

function byTaskThenIndex(a: TaskInstanceRow, b: TaskInstanceRow): number {
  return a.task_id < b.task_id ? -1 : a.task_id > b.task_id ? 1 : a.map_index - b.map_index;
}

/** The history row archiving `r` (a task-instance row as read) with `state`. */
function historyOf(
  r: Selectable<TaskInstancesTable>,
  state: string,
  now: number,
): Insertable<TaskInstanceHistoryTable> {
  return {
    id: randomUUID(),
    tenant_id: r.tenant_id,
    dag_run_id: r.dag_run_id,
    task_id: r.task_id,
    ...(r.map_index !== undefined && Number(r.map_index) !== -1
      ? { map_index: Number(r.map_index) }
      : {}),
    try_number: r.try_number,
    state,
    started_at: r.started_at,
    ended_at: r.ended_at,
    exit_code: r.exit_code,
    error_message: r.error_message,
    archived_at: now,
  };
}

/**
 * TASK_INSTANCE_RESET without the executor: a new row is held by none (the column's default), and
 * leaving it out keeps the insert valid on a store short of migration 0006 (the upgrade tests
 * insert rows at 0001).
 */
const { executor: _noExecutorYet, ...FRESH_ROW_RUNTIME } = TASK_INSTANCE_RESET;

/** A new task instance row: state `none`, try 1 (createRun and ensureTaskInstances). */
export function newTaskInstance(
  dialect: StoreDialect,
  tenant_id: string,
  dag_id: string,
  dag_run_id: string,
  task: { task_id: string; max_tries: number },
  now: number,
): Insertable<TaskInstancesTable> {
  return {
    id: randomUUID(),
    tenant_id,
    dag_run_id,
    dag_id,
    task_id: task.task_id,
    try_number: 1,
    max_tries: task.max_tries,
    state: 'none',
    ...FRESH_ROW_RUNTIME,
    // the one boolean, in the dialect's encoding
    terminate_requested: dbBool(dialect, FRESH_ROW_RUNTIME.terminate_requested),
    retry_at: null,
    exit_code: null,
    error_message: null,
    updated_at: now,
  };
}
