/**
 * The last point p ≤ atMs of a discrete set, given only `nextAfter(x)` = the set's least
 * member strictly greater than x (or null). Used as the trusted fallback for "previous cron
 * fire": it needs nothing but the forward walk, so it inherits that walk's DST behaviour.
 *
 * Gallops back from atMs until some member lands in (lo, atMs], then bisects for the last
 * `lo` whose successor is still ≤ atMs; that successor is the answer. Invariant while
 * bisecting: nextAfter(lo) ≤ atMs < nextAfter(hi) (or nextAfter(hi) null). Cost is
 * O(log(gap)) calls, where gap is the distance back to the answer. Null when no member lies
 * within `maxBackMs` of atMs.
 */
export function lastAtOrBefore(
  nextAfter: (x: number) => number | null,
  atMs: number,
  maxBackMs: number,
): number | null {
  const within = (f: number | null): f is number => f !== null && f <= atMs;
  let hi = atMs;
  let step = 60_000;
  let lo = atMs - step;
  while (!within(nextAfter(lo))) {
    if (step >= maxBackMs) return null;
    hi = lo;
    step = Math.min(step * 2, maxBackMs);
    lo = atMs - step;
  }
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    if (within(nextAfter(mid))) lo = mid;
    else hi = mid;
  }
  return nextAfter(lo);
}
