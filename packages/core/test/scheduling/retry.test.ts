import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { afterFailure, maxTriesFor } from '@leoflow/core';

const NOW = Date.parse('2026-08-20T12:00:00Z');

describe('afterFailure', () => {
  it.each([
    // tryNumber, maxTries (retries + 1), delay s, expected
    [1, 1, 60, { kind: 'fail' }],
    [1, 2, 60, { kind: 'retry', retryAt: NOW + 60_000 }],
    [2, 2, 60, { kind: 'fail' }],
    [2, 4, 300, { kind: 'retry', retryAt: NOW + 300_000 }],
    [3, 4, 0, { kind: 'retry', retryAt: NOW }],
    [4, 4, 300, { kind: 'fail' }],
    [5, 4, 300, { kind: 'fail' }],
    [1, 2, 1.5, { kind: 'retry', retryAt: NOW + 1500 }],
  ] as const)('try %i of %i, delay %ss → %j', (tryNumber, maxTries, retryDelaySeconds, want) => {
    expect(afterFailure({ tryNumber, maxTries, retryDelaySeconds, now: NOW })).toEqual(want);
  });

  it('retries exactly while tries remain, never earlier than now', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 86_400 }),
        fc.integer({ min: 0, max: 4_102_444_800_000 }),
        (tryNumber, maxTries, retryDelaySeconds, now) => {
          const d = afterFailure({ tryNumber, maxTries, retryDelaySeconds, now });
          expect(d.kind).toBe(tryNumber < maxTries ? 'retry' : 'fail');
          if (d.kind === 'retry') expect(d.retryAt).toBe(now + retryDelaySeconds * 1000);
        },
      ),
    );
  });

  it('gives a task with N retries exactly N + 1 attempts', () => {
    for (const retries of [0, 1, 3]) {
      const maxTries = maxTriesFor(retries);
      let attempts = 0;
      for (let tryNumber = 1; ; tryNumber++) {
        attempts++;
        const d = afterFailure({ tryNumber, maxTries, retryDelaySeconds: 1, now: NOW });
        if (d.kind === 'fail') break;
      }
      expect(attempts).toBe(retries + 1);
    }
  });

  it.each([
    { tryNumber: 0, maxTries: 1, retryDelaySeconds: 0, now: NOW },
    { tryNumber: 1.5, maxTries: 2, retryDelaySeconds: 0, now: NOW },
    { tryNumber: 1, maxTries: 0, retryDelaySeconds: 0, now: NOW },
    { tryNumber: 1, maxTries: 2, retryDelaySeconds: -1, now: NOW },
    { tryNumber: 1, maxTries: 2, retryDelaySeconds: Number.NaN, now: NOW },
    { tryNumber: 1, maxTries: 2, retryDelaySeconds: 1, now: Number.POSITIVE_INFINITY },
  ])('rejects nonsense input %j', (input) => {
    expect(() => afterFailure(input)).toThrow(
      expect.objectContaining({ code: 'LF_INVALID_ARGUMENT' }),
    );
  });
});

describe('maxTriesFor', () => {
  it('is retries + 1 and rejects negative or fractional retries', () => {
    expect(maxTriesFor(0)).toBe(1);
    expect(maxTriesFor(3)).toBe(4);
    expect(() => maxTriesFor(-1)).toThrow(expect.objectContaining({ code: 'LF_INVALID_ARGUMENT' }));
    expect(() => maxTriesFor(1.5)).toThrow(
      expect.objectContaining({ code: 'LF_INVALID_ARGUMENT' }),
    );
  });
});
