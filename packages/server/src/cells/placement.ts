import type { CellStore } from '../store/ports/cells.js';
import type { CellTopology } from './cell-admin.js';
import { LITE_CELL_NAME } from './cell-admin.js';

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
