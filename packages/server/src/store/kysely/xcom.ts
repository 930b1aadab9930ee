import { isActive, type TaskInstanceState } from '@leoflow/core';
import type { Kysely, Selectable } from 'kysely';
import type { Database, XComTable } from '../db-types.js';
import type { AttemptWriteFence, XComStore } from '../ports/xcom.js';
import type { XComRow } from '../types.js';
import { num, toBuffer } from './columns.js';
import { KyselySeam } from './seam.js';

/** XCom on Kysely. */
export class KyselyXComStore extends KyselySeam implements XComStore {
  async putXCom(row: XComRow): Promise<void> {
    await this.#upsertXCom(this.db, row);
  }

  async putXComIfLive(row: XComRow, fence: AttemptWriteFence): Promise<boolean> {
    return this.writeTx(async (tx) => {
      // The fence and the write in one transaction: on SQLite the write lock is held from the
      // read (begin immediate), on PostgreSQL the row lock makes a concurrent retry, clear or
      // requeue of this task instance wait (or this push see its result).
      let q = tx
        .selectFrom('task_instances')
        .select(['try_number', 'dispatch_gen', 'state'])
        .where('id', '=', fence.task_instance_id);
      if (this.dialect === 'postgres') q = q.forUpdate();
      const ti = await q.executeTakeFirst();
      if (
        ti?.try_number !== fence.try_number ||
        Number(ti.dispatch_gen) !== fence.dispatch_gen ||
        !isActive(ti.state as TaskInstanceState)
      ) {
        return false;
      }
      await this.#upsertXCom(tx, row);
      return true;
    });
  }

  async #upsertXCom(db: Kysely<Database>, row: XComRow): Promise<void> {
    const value = toBuffer(row.value);
    await db
      .insertInto('xcom')
      .values({
        tenant_id: row.tenant_id,
        dag_run_id: row.dag_run_id,
        task_id: row.task_id,
        map_index: row.map_index ?? -1,
        key: row.key,
        value,
        content_type: row.content_type,
        created_at: row.created_at,
      })
      .onConflict((oc) =>
        oc.columns(['dag_run_id', 'task_id', 'map_index', 'key']).doUpdateSet((eb) => ({
          value: eb.ref('excluded.value'),
          content_type: eb.ref('excluded.content_type'),
          created_at: eb.ref('excluded.created_at'),
        })),
      )
      .execute();
  }

  async getXCom(
    dag_run_id: string,
    task_id: string,
    key: string,
    map_index = -1,
  ): Promise<XComRow | undefined> {
    const row = await this.db
      .selectFrom('xcom')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('map_index', '=', map_index)
      .where('key', '=', key)
      .executeTakeFirst();
    return row && toXComRow(row);
  }

  async listXComs(dag_run_id: string, task_id?: string, map_index?: number): Promise<XComRow[]> {
    let q = this.db.selectFrom('xcom').selectAll().where('dag_run_id', '=', dag_run_id);
    if (task_id !== undefined) q = q.where('task_id', '=', task_id);
    if (map_index !== undefined) q = q.where('map_index', '=', map_index);
    const rows = await q.orderBy('task_id').orderBy('map_index').orderBy('key').execute();
    return rows.map(toXComRow);
  }

  async listMappedXComs(dag_run_id: string, task_id: string, key: string): Promise<XComRow[]> {
    const rows = await this.db
      .selectFrom('xcom')
      .selectAll()
      .where('dag_run_id', '=', dag_run_id)
      .where('task_id', '=', task_id)
      .where('map_index', '>=', 0)
      .where('key', '=', key)
      .orderBy('map_index')
      .execute();
    return rows.map(toXComRow);
  }
}

function toXComRow(r: Selectable<XComTable>): XComRow {
  return {
    tenant_id: r.tenant_id,
    dag_run_id: r.dag_run_id,
    task_id: r.task_id,
    map_index: Number(r.map_index ?? -1),
    key: r.key,
    // A plain Uint8Array copy: callers get the declared type, not a Buffer that may be a view
    // into the driver's shared pool.
    value: new Uint8Array(r.value),
    content_type: r.content_type,
    created_at: num(r.created_at),
  };
}
