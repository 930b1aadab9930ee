/** Time is passed in, never read: core has no clock of its own. */
export interface Clock {
  /** epoch milliseconds */
  now(): number;
  /**
   * milliseconds on a clock that never jumps (performance.now), for measuring how long something
   * has lasted on this process; absent, now() serves (a ManualClock is its own monotonic clock)
   */
  monotonicNow?(): number;
}

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  constructor(private ms: number) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
}
