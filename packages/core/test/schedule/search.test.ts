import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
// Internal helper (not part of the package API): the fallback behind lastFireAtOrBefore,
// which croner's own backward walk almost always makes unnecessary, so it is tested directly.
import { lastAtOrBefore } from '../../src/schedule/search.js';

function setOf(points: number[]): (x: number) => number | null {
  const sorted = [...new Set(points)].sort((a, b) => a - b);
  return (x) => sorted.find((p) => p > x) ?? null;
}

describe('lastAtOrBefore', () => {
  it('finds the greatest member ≤ the instant in any sorted set', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -1e12, max: 1e12 }), { maxLength: 30 }),
        fc.integer({ min: -1e12, max: 1e12 }),
        (points, at) => {
          const below = points.filter((p) => p <= at);
          const want = below.length > 0 ? Math.max(...below) : null;
          expect(lastAtOrBefore(setOf(points), at, 4e12)).toBe(want);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('includes a member exactly at the instant and handles dense sets', () => {
    const everyMs = (x: number): number => Math.floor(x) + 1;
    expect(lastAtOrBefore(everyMs, 1000, 1e6)).toBe(1000);
    const every7 = (x: number): number => (Math.floor(x / 7) + 1) * 7;
    expect(lastAtOrBefore(every7, 100, 1e6)).toBe(98);
    expect(lastAtOrBefore(every7, 98, 1e6)).toBe(98);
  });

  it('gives up beyond maxBackMs', () => {
    expect(lastAtOrBefore(setOf([0]), 10_000_000, 1_000_000)).toBeNull();
    expect(lastAtOrBefore(setOf([0]), 10_000_000, 20_000_000)).toBe(0);
    expect(lastAtOrBefore(setOf([]), 0, 1e9)).toBeNull();
  });
});
