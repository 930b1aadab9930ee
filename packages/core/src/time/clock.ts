/** Time is passed in, never read: core has no clock of its own. */
export interface Clock {
  /** epoch milliseconds */
  now(): number;
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
