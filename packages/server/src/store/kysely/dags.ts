import type { DagSpec } from '@leoflow/core';
import type { Selectable } from 'kysely';
import type { DagsTable } from '../db-types.js';
import type { DagStore, PutDagVersionOptions } from '../ports/dags.js';
import type {
  DagImportDiagnostic,
  DagImportErrorRow,
  DagRow,
  DagVersionRow,
  Page,
} from '../types.js';
import { changed, fromBool, isUniqueViolation, num, numOrNull } from './columns.js';
import { KyselySeam } from './seam.js';

/** DAGs and DAG versions on Kysely. */
export class KyselyDagStore extends KyselySeam implements DagStore {
  async putDagVersion(
    tenant_id: string,
    spec: DagSpec,
    spec_hash: string,
    now: number,
    opts: PutDagVersionOptions = {},
  ): Promise<{ version: number; created: boolean }> {
    const paused = opts.pausedAtCreation === true;
    const source = opts.sourceFile;
    try {
      return await this.#putDagVersionOnce(tenant_id, spec, spec_hash, now, paused, source);
    } catch (err) {
      // The row lock below already serialises pushes of one DAG; the primary key is the
      // last line of defence, and a push that loses to it simply re-reads and tries again.
      if (!isUniqueViolation(err)) throw err;
      return await this.#putDagVersionOnce(tenant_id, spec, spec_hash, now, paused, source);
    }
  }

  async #putDagVersionOnce(
    tenant_id: string,
    spec: DagSpec,
    spec_hash: string,
    now: number,
    pausedAtCreation: boolean,
    source_file: string | null | undefined,
  ): Promise<{ version: number; created: boolean }> {
    const dag_id = spec.dag_id;
    return this.writeTx(async (tx) => {
      // Every push first makes sure the dags row exists and then locks it, so concurrent
      // pushes of one DAG (including the very first ones, when there is no row to lock yet)
      // run one after another and always lock dags before dag_versions. A placeholder with
      // current_version 0 is only ever visible inside this transaction. Only this first
      // insert sets is_paused (dags.paused_at_creation); a later version keeps the DAG's state.
      await tx
        .insertInto('dags')
        .values({
          tenant_id,
          dag_id,
          current_version: 0,
          is_paused: this.bool(pausedAtCreation),
          last_scheduled_logical_date: null,
          created_at: now,
          updated_at: now,
          ...(source_file ? { source_file } : {}),
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
      // Whoever registered it last is where it comes from (the DAGs folder, or a push), and a
      // DAG registered again is active again. (undefined: a caller that does not say; nothing.)
      const source =
        source_file === undefined
          ? undefined
          : await tx
              .selectFrom('dags')
              .select(['source_file', 'is_active'])
              .where('tenant_id', '=', tenant_id)
              .where('dag_id', '=', dag_id)
              .executeTakeFirstOrThrow();
      if (
        source !== undefined &&
        source_file !== undefined &&
        (source.source_file !== source_file || !fromBool(source.is_active))
      ) {
        await tx
          .updateTable('dags')
          .set({ source_file, is_active: this.bool(true), updated_at: now })
          .where('tenant_id', '=', tenant_id)
          .where('dag_id', '=', dag_id)
          .execute();
      }

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
      .where('is_active', '=', this.bool(true))
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

  async setDagActive(
    tenant_id: string,
    dag_id: string,
    active: boolean,
    now: number,
  ): Promise<boolean> {
    const res = await this.db
      .updateTable('dags')
      .set({ is_active: this.bool(active), updated_at: now })
      .where('tenant_id', '=', tenant_id)
      .where('dag_id', '=', dag_id)
      .where('is_active', '=', this.bool(!active))
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async listFolderDags(
    tenant_id: string,
  ): Promise<{ dag_id: string; source_file: string; is_active: boolean }[]> {
    const rows = await this.db
      .selectFrom('dags')
      .select(['dag_id', 'source_file', 'is_active'])
      .where('tenant_id', '=', tenant_id)
      .where('source_file', 'is not', null)
      .orderBy('dag_id')
      .execute();
    return rows.map((r) => ({
      dag_id: r.dag_id,
      source_file: r.source_file ?? '',
      is_active: fromBool(r.is_active),
    }));
  }

  async setDagImportErrors(
    tenant_id: string,
    errors: Omit<DagImportErrorRow, 'tenant_id' | 'first_seen_at' | 'updated_at'>[],
    now: number,
  ): Promise<void> {
    await this.writeTx(async (tx) => {
      const before = await tx
        .selectFrom('dag_import_errors')
        .select(['file', 'diagnostics_json', 'dag_id'])
        .where('tenant_id', '=', tenant_id)
        .execute();
      const old = new Map(before.map((r) => [r.file, r]));
      const keep = new Set(errors.map((e) => e.file));
      const gone = before.map((r) => r.file).filter((f) => !keep.has(f));
      if (gone.length > 0) {
        await tx
          .deleteFrom('dag_import_errors')
          .where('tenant_id', '=', tenant_id)
          .where('file', 'in', gone)
          .execute();
      }
      for (const e of errors) {
        const diagnostics_json = JSON.stringify(e.diagnostics);
        const prev = old.get(e.file);
        if (prev === undefined) {
          await tx
            .insertInto('dag_import_errors')
            .values({
              tenant_id,
              file: e.file,
              dag_id: e.dag_id,
              diagnostics_json,
              first_seen_at: now,
              updated_at: now,
            })
            .onConflict((oc) => oc.columns(['tenant_id', 'file']).doNothing())
            .execute();
        } else if (prev.diagnostics_json !== diagnostics_json || prev.dag_id !== e.dag_id) {
          await tx
            .updateTable('dag_import_errors')
            .set({ dag_id: e.dag_id, diagnostics_json, updated_at: now })
            .where('tenant_id', '=', tenant_id)
            .where('file', '=', e.file)
            .execute();
        }
      }
    });
  }

  async listDagImportErrors(tenant_id: string): Promise<DagImportErrorRow[]> {
    const rows = await this.db
      .selectFrom('dag_import_errors')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('file')
      .execute();
    return rows.map((r) => ({
      tenant_id: r.tenant_id,
      file: r.file,
      dag_id: r.dag_id,
      diagnostics: JSON.parse(r.diagnostics_json) as DagImportDiagnostic[],
      first_seen_at: num(r.first_seen_at),
      updated_at: num(r.updated_at),
    }));
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
    source_file: r.source_file,
    is_active: fromBool(r.is_active),
  };
}
