import type { Clock } from '@leoflow/core';

export interface ThrottleLimits {
  /** 401s one source may collect in a window before it is refused without a lookup */
  limit: number;
  windowMs: number;
}

export const DEFAULT_THROTTLE: ThrottleLimits = { limit: 30, windowMs: 60_000 };
/** Sources tracked at most; past it the oldest windows are forgotten (memory stays bounded). */
const MAX_SOURCES = 50_000;

/**
 * Fixed windows of 401s per source address. A throttled source gets the same 401 as any other
 * without a directory lookup, until its window ends — including for a good token, so a runner
 * behind the same NAT as a guesser waits out the window (docs/runners.md).
 */
export class UnauthorizedThrottle {
  readonly #windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly limits: ThrottleLimits = DEFAULT_THROTTLE,
  ) {}

  isThrottled(source: string): boolean {
    const w = this.#windows.get(source);
    if (!w) return false;
    if (this.clock.now() - w.start >= this.limits.windowMs) {
      this.#windows.delete(source);
      return false;
    }
    return w.count >= this.limits.limit;
  }

  noteUnauthorized(source: string): void {
    const now = this.clock.now();
    const w = this.#windows.get(source);
    if (!w || now - w.start >= this.limits.windowMs) {
      this.#windows.delete(source);
      this.#windows.set(source, { start: now, count: 1 });
      while (this.#windows.size > MAX_SOURCES) {
        const oldest = this.#windows.keys().next().value;
        if (oldest === undefined) break;
        this.#windows.delete(oldest);
      }
      return;
    }
    w.count += 1;
  }
}
