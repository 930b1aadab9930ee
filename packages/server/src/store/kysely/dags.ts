import type { DagSpec } from '@leoflow/core';
import type { Selectable } from 'kysely';
import type { DagsTable } from '../db-types.js';
import type { DagStore } from '../ports/dags.js';
import type { DagRow, DagVersionRow, Page } from '../types.js';
import { changed, fromBool, isUniqueViolation, num, numOrNull } from './columns.js';
import { KyselySeam } from './seam.js';

/** DAGs and DAG versions on Kysely. */
export class KyselyDagStore extends KyselySeam implements DagStore {
  async putDagVersion(
    tenant_id: string,
    spec: DagSpec,
    spec_hash: string,
    now: number,
  ): Promise<{ version: number; created: boolean }> {
    try {
      return await this.#putDagVersionOnce(tenant_id, spec, spec_hash, now);
    } catch (err) {
      // The row lock below already serialises pushes of one DAG; the primary key is the
      // last line of defence, and a push that loses to it simply re-reads and tries again.
      if (!isUniqueViolation(err)) throw err;
      return await this.#putDagVersionOnce(tenant_id, spec, spec_hash, now);
    }
  }

  async #putDagVersionOnce(
    tenant_id: string,
    spec: DagSpec,
    spec_hash: string,
    now: number,
  ): Promise<{ version: number; created: boolean }> {
    const dag_id = spec.dag_id;
    return this.writeTx(async (tx) => {
      // Every push first makes sure the dags row exists and then locks it, so concurrent
      // pushes of one DAG (including the very first ones, when there is no row to lock yet)
      // run one after another and always lock dags before dag_versions. A placeholder with
      // current_version 0 is only ever visible inside this transaction.
      await tx
        .insertInto('dags')
        .values({
          tenant_id,
          dag_id,
          current_version: 0,
          is_paused: this.bool(false),
          last_scheduled_logical_date: null,
          created_at: now,
          updated_at: now,
        })
        .onConflict((oc) => oc.columns(['tenant_id', 'dag_id']).doNothing())
        .execute();
      let dagQuery = tx
        .selectFrom('dags')
        .select(['current_version'])
        .where('tenant_id', '=', tenant_id)
        .where('dag_id', '=', dag_id);
      if (this.dialect === 'postgres') dagQuery = dagQuery.forUpdate();
      const dag = await dagQuery.executeTakeFirstOrThrow();

      if (dag.current_version > 0) {
        const current = await tx
          .selectFrom('dag_versions')
          .select(['spec_hash'])
          .where('tenant_id', '=', tenant_id)
          .where('dag_id', '=', dag_id)
          .where('version', '=', dag.current_version)
          .executeTakeFirst();
        if (current?.spec_hash === spec_hash) {
          return { version: dag.current_version, created: false };
        }
      }

      const max = await tx
        .selectFrom('dag_versions')
        .select((eb) => eb.fn.max<number | null>('version').as('max_version'))
        .where('tenant_id', '=', tenant_id)
        .where('dag_id', '=', dag_id)
        .executeTakeFirst();
      const version = Number(max?.max_version ?? 0) + 1;

      await tx
        .insertInto('dag_versions')
        .values({
          tenant_id,
          dag_id,
          version,
          spec_json: JSON.stringify(spec),
          spec_hash,
          created_at: now,
        })
        .execute();
      await tx
        .updateTable('dags')
        .set({ current_version: version, updated_at: now })
        .where('tenant_id', '=', tenant_id)
        .where('dag_id', '=', dag_id)
        .execute();
      return { version, created: true };
    });
  }

  async getDag(tenant_id: string, dag_id: string): Promise<DagRow | undefined> {
    const row = await this.db
      .selectFrom('dags')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .executeTakeFirst();
    return row && toDagRow(row);
  }

  async listDags(tenant_id: string, page: Page): Promise<DagRow[]> {
    const rows = await this.db
      .selectFrom('dags')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('dag_id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(toDagRow);
  }

  async listSchedulableDags(): Promise<DagRow[]> {
    const rows = await this.db
      .selectFrom('dags')
      .selectAll()
      .where('is_paused', '=', this.bool(false))
      .orderBy('tenant_id')
      .orderBy('dag_id')
      .execute();
    return rows.map(toDagRow);
  }

  async getDagVersion(
    tenant_id: string,
    dag_id: string,
    version: number,
  ): Promise<DagVersionRow | undefined> {
    const row = await this.db
      .selectFrom('dag_versions')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('version', '=', version)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    return {
      tenant_id: row.tenant_id,
      dag_id: row.dag_id,
      version: row.version,
      spec: JSON.parse(row.spec_json) as DagSpec,
      spec_hash: row.spec_hash,
      created_at: num(row.created_at),
    };
  }

  async listDagVersions(tenant_id: string, dag_id: string): Promise<Omit<DagVersionRow, 'spec'>[]> {
    const rows = await this.db
      .selectFrom('dag_versions')
      .select(['tenant_id', 'dag_id', 'version', 'spec_hash', 'created_at'])
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .orderBy('version')
      .execute();
    return rows.map((r) => ({ ...r, created_at: num(r.created_at) }));
  }

  async setDagPaused(
    tenant_id: string,
    dag_id: string,
    paused: boolean,
    now: number,
  ): Promise<boolean> {
    const res = await this.db
      .updateTable('dags')
      .set({ is_paused: this.bool(paused), updated_at: now })
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }
}

function toDagRow(r: Selectable<DagsTable>): DagRow {
  return {
    tenant_id: r.tenant_id,
    dag_id: r.dag_id,
    current_version: r.current_version,
    is_paused: fromBool(r.is_paused),
    last_scheduled_logical_date: numOrNull(r.last_scheduled_logical_date),
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
  };
}
