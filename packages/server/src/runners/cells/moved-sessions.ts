import type { CellStore } from '../../store/ports/cells.js';
import type { RunnerStore } from '../../store/ports/runners.js';
import type { CellTopology } from '../cell-topology.js';
import { servesTenant } from '../placement.js';
import { type RunnerSessions } from '../runner-sessions.js';
import { SESSION_CLOSE } from '@leoflow/protocol';

export interface MovedSessionDeps {
  sessions: RunnerSessions;
  directory: Pick<CellStore, 'getPlacement' | 'getCell'> & Pick<RunnerStore, 'runnerById'>;
  topology: CellTopology;
  /** this cell's name in the directory (null: it serves no tenant, so every session goes) */
  cellName: string | null;
}

/**
 * Closes this cell's live runner sessions whose tenant it no longer serves (placed elsewhere,
 * or the runner gone). A placement only steers the door's next connection; an established
 * session stays where it is until this runs (`leoflow tenants place` / `leoflow cells drain`
 * on the old cell), and the daemon reconnects through the door to the tenant's new cell.
 * Returns how many sessions were closed.
 */
export async function closeMovedSessions(d: MovedSessionDeps): Promise<number> {
  if (d.topology.kind === 'lite') return 0;
  let closed = 0;
  for (const id of d.sessions.runnerIds()) {
    const runner = await d.directory.runnerById(id);
    const stays =
      runner !== undefined &&
      (await servesTenant(d.directory, d.topology, d.cellName, runner.tenant_id));
    if (!stays) closed += d.sessions.closeRunner(id, SESSION_CLOSE.tenantMoved);
  }
  return closed;
}
