import { describe, expect, it } from 'vitest';
import { CellAdmin } from '../../../src/runners/cells/cell-admin.js';
import { closeMovedSessions } from '../../../src/runners/cells/moved-sessions.js';
import { RunnerSessions } from '../../../src/runners/runner-sessions.js';
import { SESSION_CLOSE } from '@leoflow/protocol';
import type { CellRecord, TenantPlacement } from '../../../src/store/directory-types.js';
import type { CellStore } from '../../../src/store/ports/cells.js';

/** A directory of two cells; placements and runners as the test sets them. */
function directory(placed: Record<string, string>, runners: Record<string, string>) {
  const cell = (name: string): CellRecord => ({
    name,
    url: `http://${name}`,
    state: 'active',
    created_at: 0,
    updated_at: 0,
  });
  return {
    getCell: (name: string) =>
      Promise.resolve(['cell-a', 'cell-b'].includes(name) ? cell(name) : undefined),
    getPlacement: (tenant_id: string) =>
      Promise.resolve(
        placed[tenant_id]
          ? {
              tenant_id,
              cell: placed[tenant_id],
              placed_by: 'x',
              placed_at: 0,
            }
          : undefined,
      ),
    runnerById: (id: string) =>
      Promise.resolve(
        runners[id]
          ? { id, tenant_id: runners[id], name: id, kind: 'inbound' as const }
          : undefined,
      ),
  };
}

function session(closed: number[]) {
  return { close: (code: number) => void closed.push(code) };
}

describe("closing a cell's sessions of moved tenants", () => {
  it('closes (tenant moved: reconnect) the sessions of tenants placed elsewhere or of gone runners, and keeps the rest', async () => {
    const sessions = new RunnerSessions();
    const moved: number[] = [];
    const stays: number[] = [];
    const gone: number[] = [];
    sessions.add('r-moved', session(moved));
    sessions.add('r-moved', session(moved));
    sessions.add('r-stays', session(stays));
    sessions.add('r-gone', session(gone));
    const n = await closeMovedSessions({
      sessions,
      directory: directory({ t1: 'cell-b', t2: 'cell-a' }, { 'r-moved': 't1', 'r-stays': 't2' }),
      topology: { kind: 'directory' },
      cellName: 'cell-a',
    });
    expect(n).toBe(3);
    expect(moved).toEqual([SESSION_CLOSE.tenantMoved.code, SESSION_CLOSE.tenantMoved.code]);
    expect(gone).toEqual([SESSION_CLOSE.tenantMoved.code]);
    expect(stays).toEqual([]);
    expect(sessions.runnerIds()).toEqual(['r-stays']);
    // the daemon reconnects on it: it is not the "runner deleted" close
    expect(SESSION_CLOSE.tenantMoved.code).not.toBe(SESSION_CLOSE.runnerDeleted.code);
  });

  it("Lite's one cell serves every tenant: nothing is closed", async () => {
    const sessions = new RunnerSessions();
    const closed: number[] = [];
    sessions.add('r', session(closed));
    const n = await closeMovedSessions({
      sessions,
      directory: directory({}, { r: 't1' }),
      topology: { kind: 'lite', url: 'http://x' },
      cellName: null,
    });
    expect(n).toBe(0);
    expect(closed).toEqual([]);
  });
});

describe('CellAdmin runs the close after a placement and a drain', () => {
  it('calls onPlacementChanged once the placement is stored, and once the cell is draining', async () => {
    const cells = new Map<string, CellRecord>();
    const placements = new Map<string, TenantPlacement>();
    const store: CellStore = {
      insertCell: (row) => Promise.resolve(!cells.has(row.name) && !!cells.set(row.name, row)),
      getCell: (name) => Promise.resolve(cells.get(name)),
      listCells: () => Promise.resolve([...cells.values()]),
      setCellState: (name, state) => {
        const c = cells.get(name);
        if (c) c.state = state;
        return Promise.resolve(!!c);
      },
      placeTenant: (p) => Promise.resolve(void placements.set(p.tenant_id, p)),
      getPlacement: (t) => Promise.resolve(placements.get(t)),
      listPlacements: () => Promise.resolve([...placements.values()]),
      countPlacementsByCell: () => Promise.resolve(new Map()),
    };
    const seen: string[] = [];
    const admin = new CellAdmin({
      cells: store,
      clock: { now: () => 1 },
      topology: { kind: 'directory' },
      onPlacementChanged: () => {
        seen.push(`${placements.get('t1')?.cell ?? '-'} ${cells.get('cell-a')?.state ?? '-'}`);
        return Promise.resolve(0);
      },
    });
    await admin.add('cell-a', 'http://a');
    await admin.add('cell-b', 'http://b');
    expect(seen).toEqual([]);
    await admin.place('t1', 'cell-b', 'admin');
    await admin.drain('cell-a');
    expect(seen).toEqual(['cell-b active', 'cell-b draining']);
  });
});
