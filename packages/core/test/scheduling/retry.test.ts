import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  afterFailure,
  maxTriesFor,
  MAX_TASK_RETRY_DELAY_SECONDS,
  retryBackoffSeconds,
  sha1Hex,
} from '@leoflow/core';

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

interface BackoffVector {
  dag_id: string;
  task_id: string;
  logical_date_ms: number | null;
  retry_delay_seconds: number;
  multiplier: number;
  try_number: number;
  max_retry_delay_seconds: number | null;
  delay_seconds: number;
}

// Computed by Airflow itself (apache-airflow-core 3.3.2, TaskInstance.next_retry_datetime):
// test/oracle/retry_backoff_vectors.py.
const VECTORS = JSON.parse(
  readFileSync(new URL('./retry-backoff.vectors.json', import.meta.url), 'utf8'),
) as BackoffVector[];

describe('retryBackoffSeconds: Airflow 3 retry_exponential_backoff, jitter and caps', () => {
  it(`reproduces Airflow's delay exactly (${VECTORS.length} vectors)`, () => {
    expect(VECTORS.length).toBeGreaterThan(400);
    const wrong: string[] = [];
    for (const v of VECTORS) {
      const got = retryBackoffSeconds({
        multiplier: v.multiplier,
        ...(v.max_retry_delay_seconds !== null
          ? { maxRetryDelaySeconds: v.max_retry_delay_seconds }
          : {}),
        dagId: v.dag_id,
        taskId: v.task_id,
        logicalDate: v.logical_date_ms,
        retryDelaySeconds: v.retry_delay_seconds,
        tryNumber: v.try_number,
      });
      if (got !== v.delay_seconds) wrong.push(`${JSON.stringify(v)} → ${got}`);
    }
    expect(wrong).toEqual([]);
  });

  it('covers jitter (delays strictly between the floor and twice it) and both caps', () => {
    const jittered = VECTORS.filter(
      (v) =>
        v.multiplier > 1 &&
        v.max_retry_delay_seconds === null &&
        v.delay_seconds > Math.ceil(v.retry_delay_seconds * v.multiplier ** (v.try_number - 1)),
    );
    expect(jittered.length).toBeGreaterThan(20);
    expect(VECTORS.some((v) => v.delay_seconds === MAX_TASK_RETRY_DELAY_SECONDS)).toBe(true);
    expect(VECTORS.some((v) => v.max_retry_delay_seconds !== null && v.delay_seconds === 600)).toBe(
      true,
    );
  });

  it('is the constant delay for multiplier 0 or 1, and lies in [floor, 2 × floor) otherwise', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3600 }),
        fc.constantFrom(1.5, 2, 3),
        fc.integer({ min: 1, max: 12 }),
        fc.string(),
        (delay, multiplier, tryNumber, taskId) => {
          const base = { dagId: 'd', taskId, logicalDate: 0, retryDelaySeconds: delay, tryNumber };
          expect(retryBackoffSeconds({ ...base, multiplier: 0 })).toBe(delay);
          expect(retryBackoffSeconds({ ...base, multiplier: 1 })).toBe(delay);
          const floor = Math.max(1, Math.ceil(delay * multiplier ** (tryNumber - 1)));
          const got = retryBackoffSeconds({ ...base, multiplier });
          expect(got).toBeGreaterThanOrEqual(Math.min(floor, MAX_TASK_RETRY_DELAY_SECONDS));
          expect(got).toBeLessThan(Math.max(2 * floor, MAX_TASK_RETRY_DELAY_SECONDS + 1));
        },
      ),
    );
  });

  it('afterFailure schedules the retry after the backoff delay', () => {
    const backoff = {
      multiplier: 2,
      dagId: 'etl',
      taskId: 'load',
      logicalDate: Date.UTC(2026, 0, 1),
    };
    const d = afterFailure({ tryNumber: 3, maxTries: 5, retryDelaySeconds: 60, now: NOW, backoff });
    const seconds = retryBackoffSeconds({ ...backoff, retryDelaySeconds: 60, tryNumber: 3 });
    expect(d).toEqual({ kind: 'retry', retryAt: NOW + seconds * 1000 });
    expect(seconds).toBeGreaterThanOrEqual(240);
    expect(seconds).toBeLessThan(480);
  });
});

describe('sha1Hex', () => {
  it.each([
    ['', 'da39a3ee5e6b4b0d3255bfef95601890afd80709'],
    ['abc', 'a9993e364706816aba3e25717850c26c9cd0d89d'],
    [
      'abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq',
      '84983e441c3bd26ebaae4aa1f95129e5e54670f1',
    ],
    ['a'.repeat(1000), '291e9a6c66994949b57ba5e650361e98fc36b1ba'],
  ])('%j', (input, hex) => {
    expect(sha1Hex(input)).toBe(hex);
  });
});
