/** A pool grown past its floor falls back one agent per this long without a miss. */
export const STANDBY_SHRINK_AFTER_MS = 60_000;

/**
 * How many standby agents the subprocess executor keeps. `execution.standby_agents` is the
 * floor. An attempt that finds the pool empty (a chain whose hops come faster than a new agent
 * boots) raises the target by one, up to twice the floor; each quiet period without such a miss
 * lowers it by one, back to the floor. An idle install holds the floor; a busy one stops paying
 * an agent's cold start on every other hop. Each standby agent still serves one attempt only.
 */
export class StandbyPoolSize {
  readonly ceiling: number;
  #target: number;
  #lastChangeAt: number;

  constructor(
    readonly floor: number,
    private readonly now: () => number = Date.now,
    readonly quietMs: number = STANDBY_SHRINK_AFTER_MS,
  ) {
    this.floor = Math.max(0, Math.floor(floor));
    this.ceiling = this.floor * 2;
    this.#target = this.floor;
    this.#lastChangeAt = now();
  }

  get target(): number {
    return this.#target;
  }

  /** An attempt was started: `fromPool` false means it found the pool empty. */
  attemptStarted(fromPool: boolean): void {
    if (fromPool || this.floor === 0) return;
    if (this.#target < this.ceiling) this.#target += 1;
    this.#lastChangeAt = this.now();
  }

  /** One step back toward the floor once a quiet period has passed; true when it stepped. */
  settle(): boolean {
    if (this.#target <= this.floor || this.now() - this.#lastChangeAt < this.quietMs) return false;
    this.#target -= 1;
    this.#lastChangeAt = this.now();
    return true;
  }
}
