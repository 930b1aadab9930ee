import type { Selectable } from 'kysely';
import type { CellsTable, TenantPlacementsTable } from '../db-types.js';
import type { CellRecord, CellState, TenantPlacement } from '../directory-types.js';
import type { CellStore } from '../ports/cells.js';
import { changed, isUniqueViolation, num } from './columns.js';
import { KyselySeam } from './seam.js';

/** Cells and tenant placements of the directory, on Kysely. */
export class KyselyCellStore extends KyselySeam implements CellStore {
  async insertCell(row: CellRecord): Promise<boolean> {
    try {
      await this.db.insertInto('cells').values(row).execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async getCell(name: string): Promise<CellRecord | undefined> {
    const row = await this.db
      .selectFrom('cells')
      .selectAll()
      .where('name', '=', name)
      .executeTakeFirst();
    return row ? cellRecord(row) : undefined;
  }

  async listCells(): Promise<CellRecord[]> {
    const rows = await this.db.selectFrom('cells').selectAll().orderBy('name').execute();
    return rows.map(cellRecord);
  }

  async setCellState(name: string, state: CellState, now: number): Promise<boolean> {
    const res = await this.db
      .updateTable('cells')
      .set({ state, updated_at: now })
      .where('name', '=', name)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async placeTenant(p: TenantPlacement): Promise<void> {
    await this.db
      .insertInto('tenant_placements')
      .values(p)
      .onConflict((oc) =>
        oc
          .column('tenant_id')
          .doUpdateSet({ cell: p.cell, placed_by: p.placed_by, placed_at: p.placed_at }),
      )
      .execute();
  }

  async getPlacement(tenant_id: string): Promise<TenantPlacement | undefined> {
    const row = await this.db
      .selectFrom('tenant_placements')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .executeTakeFirst();
    return row ? placement(row) : undefined;
  }

  async listPlacements(): Promise<TenantPlacement[]> {
    const rows = await this.db
      .selectFrom('tenant_placements')
      .selectAll()
      .orderBy('tenant_id')
      .execute();
    return rows.map(placement);
  }

  async countPlacementsByCell(): Promise<Map<string, number>> {
    const rows = await this.db
      .selectFrom('tenant_placements')
      .select((eb) => ['cell', eb.fn.countAll<number>().as('n')])
      .groupBy('cell')
      .execute();
    return new Map(rows.map((r) => [r.cell, Number(r.n)]));
  }
}

function cellRecord(r: Selectable<CellsTable>): CellRecord {
  return {
    name: r.name,
    url: r.url,
    state: r.state as CellState,
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
  };
}

function placement(r: Selectable<TenantPlacementsTable>): TenantPlacement {
  return {
    tenant_id: r.tenant_id,
    cell: r.cell,
    placed_by: r.placed_by,
    placed_at: num(r.placed_at),
  };
}
