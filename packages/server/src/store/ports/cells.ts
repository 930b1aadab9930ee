import type { CellRecord, CellState, TenantPlacement } from '../directory-types.js';

/** Cells and tenant → current cell placements, in the directory. */
export interface CellStore {
  /** false when a cell of that name exists */
  insertCell(row: CellRecord): Promise<boolean>;
  getCell(name: string): Promise<CellRecord | undefined>;
  listCells(): Promise<CellRecord[]>;
  setCellState(name: string, state: CellState, now: number): Promise<boolean>;
  /** creates or replaces the tenant's placement */
  placeTenant(p: TenantPlacement): Promise<void>;
  getPlacement(tenant_id: string): Promise<TenantPlacement | undefined>;
  listPlacements(): Promise<TenantPlacement[]>;
  /** how many tenants each cell currently holds */
  countPlacementsByCell(): Promise<Map<string, number>>;
}
