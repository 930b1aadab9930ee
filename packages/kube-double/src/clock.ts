/** Wall-clock milliseconds; injectable so token expiry and TokenReview tests never sleep. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to. */
export class ManualClock implements Clock {
  constructor(private current: number = Date.parse('2026-01-01T00:00:00Z')) {}
  now(): number {
    return this.current;
  }
  advance(milliseconds: number): void {
    this.current += milliseconds;
  }
  set(milliseconds: number): void {
    this.current = milliseconds;
  }
}

/** RFC 3339 at second precision, as metav1.Time serialises. */
export function rfc3339(milliseconds: number): string {
  return new Date(Math.floor(milliseconds / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
