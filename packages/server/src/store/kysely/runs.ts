import { randomUUID } from 'node:crypto';
import type { DagRunState } from '@leoflow/core';
import { sql, type Insertable, type Selectable, type Updateable } from 'kysely';
import type { DagRunsTable } from '../db-types.js';
import type { LeaderFence } from '../ports/leader-fence.js';
import type { NewRun, RunSpecRef, RunStore } from '../ports/runs.js';
import type { DagRunRow, Page, RunType } from '../types.js';
import { chunks, INSERT_CHUNK } from './chunks.js';
import { changed, isUniqueViolation, num, numOrNull } from './columns.js';
import { leaderFenceHolds } from './leader-fence.js';
import { KyselySeam } from './seam.js';
import { newTaskInstance } from './task-instances.js';

/** DAG runs on Kysely; creating one inserts its task instances in the same transaction. */
export class KyselyRunStore extends KyselySeam implements RunStore {
  async createRun(run: NewRun, fence?: LeaderFence): Promise<DagRunRow | undefined> {
    const fenceHolds = leaderFenceHolds(this.dialect, fence);
    const id = randomUUID();
    const row: Insertable<DagRunsTable> = {
      id,
      tenant_id: run.tenant_id,
      dag_id: run.dag_id,
      run_id: run.run_id,
      dag_version: run.dag_version,
      run_type: run.run_type,
      state: 'queued',
      logical_date: run.logical_date,
      data_interval_start: run.data_interval_start,
      data_interval_end: run.data_interval_end,
      conf_json: JSON.stringify(run.conf),
      created_at: run.now,
      started_at: null,
      ended_at: null,
    };
    try {
      const created = await this.writeTx(async (tx) => {
        if (fenceHolds !== undefined) {
          // First in the transaction, and its row lock lasts until commit (leader-fence.ts).
          const { rows } = await sql<{ held: boolean }>`select ${fenceHolds} as held`.execute(tx);
          if (rows[0]?.held !== true) return false;
        }
        const existing = await tx
          .selectFrom('dag_runs')
          .select('id')
          .where('tenant_id', '=', run.tenant_id)
          .where('dag_id', '=', run.dag_id)
          .where('run_id', '=', run.run_id)
          .executeTakeFirst();
        if (existing !== undefined) return false;

        await tx.insertInto('dag_runs').values(row).execute();
        const tis = run.tasks.map((t) =>
          newTaskInstance(this.dialect, run.tenant_id, run.dag_id, id, t, run.now),
        );
        for (const chunk of chunks(tis, INSERT_CHUNK)) {
          await tx.insertInto('task_instances').values(chunk).execute();
        }

        if (run.run_type === 'scheduled' && run.logical_date !== null) {
          const ld = run.logical_date;
          // Backfills and catch-up may create runs out of order; the planner's cursor only
          // moves forward.
          await tx
            .updateTable('dags')
            .set((eb) => ({
              last_scheduled_logical_date: eb
                .case()
                .when(
                  eb.or([
                    eb('last_scheduled_logical_date', 'is', null),
                    eb('last_scheduled_logical_date', '<', ld),
                  ]),
                )
                .then(ld)
                .else(eb.ref('last_scheduled_logical_date'))
                .end(),
            }))
            .where('tenant_id', '=', run.tenant_id)
            .where('dag_id', '=', run.dag_id)
            .execute();
        }
        return true;
      });
      return created ? toRunRow(row as Selectable<DagRunsTable>) : undefined;
    } catch (err) {
      // A concurrent creator won between our pre-check and insert. Only that case is
      // idempotent: a duplicate task_id in run.tasks must still surface as an error.
      if (isUniqueViolation(err)) {
        const winner = await this.getRun(run.tenant_id, run.dag_id, run.run_id);
        if (winner !== undefined) return undefined;
      }
      throw err;
    }
  }

  async previousSuccessInterval(
    tenant_id: string,
    dag_id: string,
    before: number,
  ): Promise<{ start: number | null; end: number | null } | undefined> {
    const row = await this.db
      .selectFrom('dag_runs')
      .select(['data_interval_start', 'data_interval_end'])
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('state', '=', 'success')
      .where('logical_date', '<', before)
      .orderBy('logical_date', 'desc')
      .limit(1)
      .executeTakeFirst();
    return (
      row && { start: numOrNull(row.data_interval_start), end: numOrNull(row.data_interval_end) }
    );
  }

  async getRunById(id: string): Promise<DagRunRow | undefined> {
    const row = await this.db
      .selectFrom('dag_runs')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toRunRow(row);
  }

  async getRunSpecRef(id: string): Promise<RunSpecRef | undefined> {
    if (this.hot !== undefined) return this.hot.runSpecRef(id);
    const row = await this.db
      .selectFrom('dag_runs')
      .select(['tenant_id', 'dag_id', 'dag_version'])
      .where('id', '=', id)
      .executeTakeFirst();
    return row && { tenant_id: row.tenant_id, dag_id: row.dag_id, dag_version: row.dag_version };
  }

  async getRun(tenant_id: string, dag_id: string, run_id: string): Promise<DagRunRow | undefined> {
    const row = await this.db
      .selectFrom('dag_runs')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('run_id', '=', run_id)
      .executeTakeFirst();
    return row && toRunRow(row);
  }

  async listRuns(
    tenant_id: string,
    filter: { dag_id?: string; state?: DagRunState; run_id?: string },
    page: Page,
  ): Promise<DagRunRow[]> {
    let q = this.db.selectFrom('dag_runs').selectAll().where('tenant_id', '=', tenant_id);
    if (filter.dag_id !== undefined) q = q.where('dag_id', '=', filter.dag_id);
    if (filter.state !== undefined) q = q.where('state', '=', filter.state);
    if (filter.run_id !== undefined) q = q.where('run_id', '=', filter.run_id);
    const rows = await q
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(toRunRow);
  }

  async listRunsInStates(states: readonly DagRunState[]): Promise<DagRunRow[]> {
    if (states.length === 0) return [];
    const rows = await this.db
      .selectFrom('dag_runs')
      .selectAll()
      .where('state', 'in', states)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toRunRow);
  }

  async countRunsInStates(
    tenant_id: string,
    dag_id: string,
    states: readonly DagRunState[],
  ): Promise<number> {
    if (states.length === 0) return 0;
    const row = await this.db
      .selectFrom('dag_runs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('state', 'in', states)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async setRunState(
    id: string,
    from: readonly DagRunState[],
    to: DagRunState,
    times: { started_at?: number | null; ended_at?: number | null },
    fence?: LeaderFence,
  ): Promise<boolean> {
    if (from.length === 0) return false;
    const set: Updateable<DagRunsTable> = { state: to };
    if (times.started_at !== undefined) set.started_at = times.started_at;
    if (times.ended_at !== undefined) set.ended_at = times.ended_at;
    let q = this.db
      .updateTable('dag_runs')
      .set(set)
      .where('id', '=', id)
      .where('state', 'in', from);
    const fenceHolds = leaderFenceHolds(this.dialect, fence);
    if (fenceHolds !== undefined) q = q.where(fenceHolds);
    const res = await q.executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async setRunVersion(id: string, dag_version: number): Promise<void> {
    await this.db.updateTable('dag_runs').set({ dag_version }).where('id', '=', id).execute();
  }
}

function toRunRow(r: Selectable<DagRunsTable>): DagRunRow {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    dag_id: r.dag_id,
    run_id: r.run_id,
    dag_version: r.dag_version,
    run_type: r.run_type as RunType,
    state: r.state as DagRunState,
    logical_date: numOrNull(r.logical_date),
    data_interval_start: numOrNull(r.data_interval_start),
    data_interval_end: numOrNull(r.data_interval_end),
    conf: JSON.parse(r.conf_json) as Record<string, unknown>,
    created_at: num(r.created_at),
    started_at: numOrNull(r.started_at),
    ended_at: numOrNull(r.ended_at),
  };
}
