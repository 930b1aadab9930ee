import type { CellStore } from '../store/ports/cells.js';
import type { CellTopology } from './cell-topology.js';
import { LITE_CELL_NAME } from './cell-topology.js';

export interface ResolvedCell {
  name: string;
  url: string;
}

/**
 * Tenant → its current cell, as the door asks on every connection attempt (never cached, so
 * a move takes effect on the next attempt). Lite answers its one implicit cell; otherwise the
 * tenant's placement, or undefined when it has none (the door answers 503).
 */
export async function currentCell(
  cells: Pick<CellStore, 'getPlacement' | 'getCell'>,
  topology: CellTopology,
  tenant_id: string,
): Promise<ResolvedCell | undefined> {
  if (topology.kind === 'lite') return { name: LITE_CELL_NAME, url: topology.url };
  const placement = await cells.getPlacement(tenant_id);
  if (!placement) return undefined;
  const cell = await cells.getCell(placement.cell);
  return cell ? { name: cell.name, url: cell.url } : undefined;
}

/**
 * Whether the cell named `cellName` serves the tenant's runner sessions now: Lite's one cell
 * serves every tenant; otherwise only the tenant's current cell, and a cell without a name
 * serves none (it cannot tell).
 */
export async function servesTenant(
  cells: Pick<CellStore, 'getPlacement' | 'getCell'>,
  topology: CellTopology,
  cellName: string | null,
  tenant_id: string,
): Promise<boolean> {
  if (topology.kind === 'lite') return true;
  if (cellName === null) return false;
  return (await currentCell(cells, topology, tenant_id))?.name === cellName;
}

/**
 * The tenants whose runners this cell serves now (the ssh runners it dials): Lite's one cell
 * serves every tenant of its store; otherwise the tenants placed on `cellName`, and none
 * without a name. Read again on every refresh, so a move takes effect without a restart.
 */
export async function servedTenants(
  cells: Pick<CellStore, 'listPlacements'>,
  topology: CellTopology,
  cellName: string | null,
  allTenants: () => Promise<string[]>,
): Promise<string[]> {
  if (topology.kind === 'lite') return allTenants();
  if (cellName === null) return [];
  return (await cells.listPlacements()).filter((p) => p.cell === cellName).map((p) => p.tenant_id);
}
