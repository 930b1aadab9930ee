import type { LeaderFence } from '../../store/ports/leader-fence.js';

/**
 * What the scheduler asks before each work-creating write: am I the leader now, and with which
 * proof? The answer may change between two calls (a lease lost, a deadline passed), so the
 * scheduler asks again before every write rather than once per tick.
 */
export interface Leadership {
  /** the fence to attach to the next write, or null when this process must not schedule now */
  fence(): LeaderFence | null;
  /** called when this process starts or stops leading (the scheduler ticks at once on gaining it) */
  onChange(listener: (leading: boolean) => void): void;
}

/** Lite's fixed epoch: there is one scheduler and it never changes. */
export const SOLE_EPOCH = 1;

const SOLE_FENCE: LeaderFence = { kind: 'sole', epoch: SOLE_EPOCH };

/**
 * Lite (one process on SQLite): always the leader, with a fixed epoch and nothing for the
 * store to check, so Lite schedules exactly as it did before leadership existed.
 */
export class SoleLeadership implements Leadership {
  fence(): LeaderFence {
    return SOLE_FENCE;
  }

  onChange(): void {
    // Never changes.
  }
}

/** An `api` replica: it never schedules, so it never contends for the lease. */
export class NeverLeads implements Leadership {
  fence(): null {
    return null;
  }

  onChange(): void {
    // Never changes.
  }
}
