import { LITE_CELL_NAME, type CellTopology } from '../cell-topology.js';
import { AuthError, type Clock } from '@leoflow/core';
import type { CellRecord, TenantPlacement } from '../../store/directory-types.js';
import type { CellStore } from '../../store/ports/cells.js';

const CELL_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Lite's one cell: never stored, always active, holding every tenant. */

export interface CellView extends CellRecord {
  /** tenants currently placed on the cell */
  tenants: number;
  implicit: boolean;
}

export interface CellAdminDeps {
  cells: CellStore;
  clock: Clock;
  topology: CellTopology;
  /**
   * After a placement or a drain: closes the sessions this cell (the one answering the call)
   * holds for tenants placed elsewhere now, so their runners reconnect to their new cell.
   */
  onPlacementChanged?: () => Promise<number>;
}

/**
 * Cells and placements (platform admins). Placing a tenant changes where the door sends its
 * runners' next sessions; it moves no data (docs/runners.md, "Moving a tenant").
 */
export class CellAdmin {
  constructor(private readonly deps: CellAdminDeps) {}

  async list(): Promise<CellView[]> {
    const t = this.deps.topology;
    if (t.kind === 'lite') {
      return [
        {
          name: LITE_CELL_NAME,
          url: t.url,
          state: 'active',
          created_at: 0,
          updated_at: 0,
          tenants: 0,
          implicit: true,
        },
      ];
    }
    const counts = await this.deps.cells.countPlacementsByCell();
    return (await this.deps.cells.listCells()).map((c) => ({
      ...c,
      tenants: counts.get(c.name) ?? 0,
      implicit: false,
    }));
  }

  async add(name: string, url: string): Promise<CellView> {
    this.#notLite();
    if (!CELL_NAME.test(name)) {
      throw new AuthError('LF_CELL_INVALID', 'cell name: 1-63 lowercase letters, digits and -', {
        field: 'name',
      });
    }
    if (!isHttpUrl(url)) {
      throw new AuthError('LF_CELL_INVALID', 'cell url: an http(s) base URL the door can reach', {
        field: 'url',
      });
    }
    const now = this.deps.clock.now();
    const row: CellRecord = { name, url, state: 'active', created_at: now, updated_at: now };
    if (!(await this.deps.cells.insertCell(row))) {
      throw new AuthError('LF_CELL_EXISTS', `cell ${name} exists`, { name });
    }
    return { ...row, tenants: 0, implicit: false };
  }

  /**
   * Draining: no new placements; tenants already there stay until they are placed elsewhere.
   * Sent to the cell being drained, it also closes its sessions of tenants moved away.
   */
  async drain(name: string): Promise<CellView> {
    this.#notLite();
    if (!(await this.deps.cells.setCellState(name, 'draining', this.deps.clock.now()))) {
      throw cellNotFound(name);
    }
    await this.deps.onPlacementChanged?.();
    const view = (await this.list()).find((c) => c.name === name);
    if (!view) throw cellNotFound(name);
    return view;
  }

  async place(tenant_id: string, cell: string, by: string): Promise<TenantPlacement> {
    this.#notLite();
    const target = await this.deps.cells.getCell(cell);
    if (!target) throw cellNotFound(cell);
    if (target.state !== 'active') {
      throw new AuthError('LF_CELL_DRAINING', `cell ${cell} is draining`, { cell });
    }
    const p: TenantPlacement = { tenant_id, cell, placed_by: by, placed_at: this.deps.clock.now() };
    await this.deps.cells.placeTenant(p);
    await this.deps.onPlacementChanged?.();
    return p;
  }

  #notLite(): void {
    if (this.deps.topology.kind === 'lite') {
      throw new AuthError(
        'LF_DIRECTORY_LITE',
        'Lite is one implicit cell; there is nothing to add, drain or place',
      );
    }
  }
}

function cellNotFound(name: string): AuthError {
  return new AuthError('LF_CELL_NOT_FOUND', `no cell ${name}`, { name });
}

function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return (
      (u.protocol === 'http:' || u.protocol === 'https:') && u.username === '' && u.password === ''
    );
  } catch {
    return false;
  }
}
