import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  SCHEDULE_PRESETS,
  dueRuns,
  lastFireAtOrBefore,
  manualRunId,
  nextFireAfter,
  scheduledRunId,
  validateSchedule,
  type DueRun,
  type DueRunsInput,
} from '@leoflow/core';

const D = (iso: string): number => Date.parse(iso);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

function firesIn(schedule: string, tz: string, from: number, to: number): number[] {
  const out: number[] = [];
  let t = nextFireAfter(schedule, tz, from - 1);
  while (t !== null && t < to) {
    out.push(t);
    t = nextFireAfter(schedule, tz, t);
  }
  return out;
}

function iso(ms: number[]): string[] {
  return ms.map((m) => new Date(m).toISOString());
}

function run(start: string, end: string): DueRun {
  return { logicalDate: D(start), dataIntervalStart: D(start), dataIntervalEnd: D(end) };
}

const BASE: DueRunsInput = {
  schedule: '@daily',
  timezone: 'UTC',
  startDate: D('2026-01-01T00:00:00Z'),
  endDate: null,
  catchup: true,
  lastLogicalDate: null,
  now: D('2026-01-04T12:00:00Z'),
  limit: 100,
};

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('nextFireAfter', () => {
  it('answers strictly after the given instant', () => {
    expect(nextFireAfter('0 0 * * *', 'UTC', D('2026-01-01T00:00:00Z'))).toBe(
      D('2026-01-02T00:00:00Z'),
    );
    expect(nextFireAfter('0 0 * * *', 'UTC', D('2026-01-01T00:00:00Z') - 1)).toBe(
      D('2026-01-01T00:00:00Z'),
    );
    expect(nextFireAfter('0 0 * * *', 'UTC', D('2026-01-01T00:00:00.500Z'))).toBe(
      D('2026-01-02T00:00:00Z'),
    );
  });

  it('reads the cron line in the given zone', () => {
    expect(nextFireAfter('0 9 * * *', 'Europe/Berlin', D('2026-01-01T00:00:00Z'))).toBe(
      D('2026-01-01T08:00:00Z'),
    );
    expect(nextFireAfter('0 9 * * *', 'America/New_York', D('2026-07-01T00:00:00Z'))).toBe(
      D('2026-07-01T13:00:00Z'),
    );
    expect(nextFireAfter('0 9 * * *', 'Asia/Kolkata', D('2026-01-01T00:00:00Z'))).toBe(
      D('2026-01-01T03:30:00Z'),
    );
  });

  it.each([
    ['@hourly', '2026-01-01T10:20:00Z', '2026-01-01T11:00:00Z'],
    ['@daily', '2026-01-01T10:20:00Z', '2026-01-02T00:00:00Z'],
    ['@midnight', '2026-01-01T10:20:00Z', '2026-01-02T00:00:00Z'],
    ['@weekly', '2026-01-01T10:20:00Z', '2026-01-04T00:00:00Z'], // 2026-01-04 is a Sunday
    ['@monthly', '2026-01-01T10:20:00Z', '2026-02-01T00:00:00Z'],
    ['@yearly', '2026-01-01T10:20:00Z', '2027-01-01T00:00:00Z'],
    ['@annually', '2026-01-01T10:20:00Z', '2027-01-01T00:00:00Z'],
  ])('%s after %s is %s', (preset, after, want) => {
    expect(nextFireAfter(preset, 'UTC', D(after))).toBe(D(want));
  });

  it('gives each preset exactly its documented cron line', () => {
    expect(SCHEDULE_PRESETS).toEqual({
      '@hourly': '0 * * * *',
      '@daily': '0 0 * * *',
      '@midnight': '0 0 * * *',
      '@weekly': '0 0 * * 0',
      '@monthly': '0 0 1 * *',
      '@yearly': '0 0 1 1 *',
      '@annually': '0 0 1 1 *',
    });
    fc.assert(
      fc.property(
        fc.constantFrom(...Object.keys(SCHEDULE_PRESETS)),
        fc.constantFrom('UTC', 'Europe/Berlin', 'America/New_York'),
        fc.integer({ min: D('2000-01-01T00:00:00Z'), max: D('2050-01-01T00:00:00Z') }),
        (preset, tz, t) => {
          expect(nextFireAfter(preset, tz, t)).toBe(
            nextFireAfter(SCHEDULE_PRESETS[preset]!, tz, t),
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it('is null for manual-only, @once, and a cron line that never fires', () => {
    expect(nextFireAfter(null, 'UTC', 0)).toBeNull();
    expect(nextFireAfter('@once', 'UTC', 0)).toBeNull();
    expect(nextFireAfter('0 0 30 2 *', 'UTC', 0)).toBeNull();
  });

  it('rejects an invalid cron line, a 6-field line, and an unknown preset with LF_DAG_BAD_CRON', () => {
    const code = expect.objectContaining({ code: 'LF_DAG_BAD_CRON' });
    expect(() => nextFireAfter('not a cron', 'UTC', 0)).toThrow(code);
    expect(() => nextFireAfter('0 0 * * * *', 'UTC', 0)).toThrow(code);
    expect(() => nextFireAfter('61 * * * *', 'UTC', 0)).toThrow(code);
    expect(() => nextFireAfter('@fortnightly', 'UTC', 0)).toThrow(code);
    expect(() => validateSchedule('0 0 * *', 'UTC')).toThrow(code);
  });

  it('rejects an unknown zone with LF_DAG_UNKNOWN_TIMEZONE', () => {
    const code = expect.objectContaining({ code: 'LF_DAG_UNKNOWN_TIMEZONE' });
    expect(() => nextFireAfter('@daily', 'Mars/Olympus', 0)).toThrow(code);
    expect(() => nextFireAfter('@daily', '', 0)).toThrow(code);
    expect(() => validateSchedule(null, 'Nowhere')).toThrow(code);
    expect(() => dueRuns({ ...BASE, timezone: 'Nowhere' })).toThrow(code);
  });

  it('accepts what it can plan', () => {
    expect(() => validateSchedule(null, 'UTC')).not.toThrow();
    expect(() => validateSchedule('@once', 'Europe/Berlin')).not.toThrow();
    expect(() => validateSchedule('*/5 9-17 * * 1-5', 'America/New_York')).not.toThrow();
  });

  it('rejects a non-finite instant', () => {
    expect(() => nextFireAfter('@daily', 'UTC', Number.NaN)).toThrow(
      expect.objectContaining({ code: 'LF_INVALID_ARGUMENT' }),
    );
  });
});

describe('purity', () => {
  it('arms no timer and ignores the wall clock', () => {
    const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout');
    const setIntervalSpy = vi.spyOn(globalThis, 'setInterval');
    const compute = () => [
      // Fresh cron lines, so the calculator is constructed inside this test.
      nextFireAfter('17 3 * * 2', 'Europe/Berlin', D('2026-05-05T00:00:00Z')),
      lastFireAtOrBefore('17 3 * * 2', 'Europe/Berlin', D('2026-05-05T00:00:00Z')),
      dueRuns({ ...BASE, schedule: '19 4 * * *', timezone: 'Asia/Tokyo' }),
      dueRuns({ ...BASE, schedule: '19 4 * * *', timezone: 'Asia/Tokyo', catchup: false }),
    ];
    const real = compute();
    expect(setTimeoutSpy).not.toHaveBeenCalled();
    expect(setIntervalSpy).not.toHaveBeenCalled();

    vi.useFakeTimers();
    vi.setSystemTime(D('1999-01-01T00:00:00Z'));
    expect(compute()).toEqual(real);
    vi.setSystemTime(D('2090-01-01T00:00:00Z'));
    expect(compute()).toEqual(real);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('DST', () => {
  // America/New_York 2026: clocks jump 02:00→03:00 on Mar 8, fall 02:00→01:00 on Nov 1.
  // Europe/Berlin 2026: 02:00→03:00 on Mar 29, 03:00→02:00 on Oct 25.
  const NY_SPRING = [D('2026-03-08T05:00:00Z'), D('2026-03-09T04:00:00Z')] as const; // 23 h
  const NY_FALL = [D('2026-11-01T04:00:00Z'), D('2026-11-02T05:00:00Z')] as const; // 25 h
  const BER_SPRING = [D('2026-03-28T23:00:00Z'), D('2026-03-29T22:00:00Z')] as const;
  const BER_FALL = [D('2026-10-24T22:00:00Z'), D('2026-10-25T23:00:00Z')] as const;

  it('fires a daily 02:30 once on the spring-forward day, at the first valid time after the gap', () => {
    expect(iso(firesIn('30 2 * * *', 'America/New_York', ...NY_SPRING))).toEqual([
      '2026-03-08T07:00:00.000Z', // 03:00 EDT
    ]);
    expect(iso(firesIn('30 2 * * *', 'Europe/Berlin', ...BER_SPRING))).toEqual([
      '2026-03-29T01:00:00.000Z', // 03:00 CEST
    ]);
    // and back to 02:30 the next day
    expect(nextFireAfter('30 2 * * *', 'America/New_York', NY_SPRING[1])).toBe(
      D('2026-03-09T06:30:00Z'),
    );
  });

  it('fires a daily time inside the repeated hour once on the fall-back day (first occurrence)', () => {
    expect(iso(firesIn('30 1 * * *', 'America/New_York', ...NY_FALL))).toEqual([
      '2026-11-01T05:30:00.000Z', // 01:30 EDT
    ]);
    expect(iso(firesIn('30 2 * * *', 'Europe/Berlin', ...BER_FALL))).toEqual([
      '2026-10-25T00:30:00.000Z', // 02:30 CEST
    ]);
    // A list of fixed times is a fixed-time schedule too: each time once.
    expect(firesIn('30 1,13 * * *', 'America/New_York', ...NY_FALL)).toHaveLength(2);
  });

  it.each([
    ['America/New_York', NY_SPRING, 23],
    ['America/New_York', NY_FALL, 25],
    ['Europe/Berlin', BER_SPRING, 23],
    ['Europe/Berlin', BER_FALL, 25],
  ] as const)('fires hourly in %s on every instant that exists (%#)', (tz, day, count) => {
    const fires = firesIn('0 * * * *', tz, ...day);
    expect(fires).toHaveLength(count);
    expect(new Set(fires).size).toBe(count);
    for (let i = 1; i < fires.length; i++) expect(fires[i]! - fires[i - 1]!).toBe(HOUR);
  });

  it('gives the repeated 01:00 hour of a New York fall-back night two distinct runs', () => {
    const runs = dueRuns({
      ...BASE,
      schedule: '0 * * * *',
      timezone: 'America/New_York',
      startDate: D('2026-11-01T04:00:00Z'),
      now: D('2026-11-01T09:00:00Z'),
    });
    expect(runs.map((r) => new Date(r.logicalDate).toISOString())).toEqual([
      '2026-11-01T04:00:00.000Z', // 00:00 EDT
      '2026-11-01T05:00:00.000Z', // 01:00 EDT
      '2026-11-01T06:00:00.000Z', // 01:00 EST
      '2026-11-01T07:00:00.000Z', // 02:00 EST
      '2026-11-01T08:00:00.000Z', // 03:00 EST
    ]);
    expect(scheduledRunId(runs[1]!.logicalDate)).not.toBe(scheduledRunId(runs[2]!.logicalDate));
  });

  it('makes the daily interval spanning the Berlin spring-forward 23 h and the fall-back one 25 h', () => {
    const spring = dueRuns({
      ...BASE,
      timezone: 'Europe/Berlin',
      startDate: D('2026-03-27T00:00:00Z'),
      now: D('2026-03-31T12:00:00Z'),
    });
    expect(spring.map((r) => (r.dataIntervalEnd - r.dataIntervalStart) / HOUR)).toEqual([
      24, 23, 24,
    ]);
    const fall = dueRuns({
      ...BASE,
      timezone: 'Europe/Berlin',
      startDate: D('2026-10-23T00:00:00Z'),
      now: D('2026-10-27T12:00:00Z'),
    });
    expect(fall.map((r) => (r.dataIntervalEnd - r.dataIntervalStart) / HOUR)).toEqual([24, 25, 24]);
  });

  it('finds the last fire across a gap the same way the forward walk does', () => {
    // 02:30 on the spring-forward day is 03:00 EDT.
    expect(lastFireAtOrBefore('30 2 * * *', 'America/New_York', D('2026-03-08T12:00:00Z'))).toBe(
      D('2026-03-08T07:00:00Z'),
    );
    // The second 01:00 of the fall-back night.
    expect(lastFireAtOrBefore('0 * * * *', 'America/New_York', D('2026-11-01T06:30:00Z'))).toBe(
      D('2026-11-01T06:00:00Z'),
    );
  });
});

describe('lastFireAtOrBefore', () => {
  it('includes a fire exactly at the instant', () => {
    expect(lastFireAtOrBefore('@daily', 'UTC', D('2026-01-02T00:00:00Z'))).toBe(
      D('2026-01-02T00:00:00Z'),
    );
    expect(lastFireAtOrBefore('@daily', 'UTC', D('2026-01-02T00:00:00Z') - 1)).toBe(
      D('2026-01-01T00:00:00Z'),
    );
  });

  it('is null for manual-only, @once and a line that never fired', () => {
    expect(lastFireAtOrBefore(null, 'UTC', 0)).toBeNull();
    expect(lastFireAtOrBefore('@once', 'UTC', 0)).toBeNull();
    expect(lastFireAtOrBefore('0 0 30 2 *', 'UTC', D('2026-01-01T00:00:00Z'))).toBeNull();
  });

  it('finds a fire years back (29 February only)', () => {
    expect(lastFireAtOrBefore('0 0 29 2 *', 'UTC', D('2026-06-01T00:00:00Z'))).toBe(
      D('2024-02-29T00:00:00Z'),
    );
  });
});

describe('dueRuns', () => {
  it('catches up every complete interval from the first fire at or after startDate', () => {
    expect(dueRuns(BASE)).toEqual([
      run('2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z'),
      run('2026-01-02T00:00:00Z', '2026-01-03T00:00:00Z'),
      run('2026-01-03T00:00:00Z', '2026-01-04T00:00:00Z'),
    ]);
  });

  it('aligns a startDate that is not on the schedule to the next fire', () => {
    expect(dueRuns({ ...BASE, startDate: D('2026-01-01T06:00:00Z') })).toEqual([
      run('2026-01-02T00:00:00Z', '2026-01-03T00:00:00Z'),
      run('2026-01-03T00:00:00Z', '2026-01-04T00:00:00Z'),
    ]);
  });

  it('makes a run due exactly when its interval ends, not before', () => {
    expect(dueRuns({ ...BASE, now: D('2026-01-02T00:00:00Z') })).toEqual([
      run('2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z'),
    ]);
    expect(dueRuns({ ...BASE, now: D('2026-01-02T00:00:00Z') - 1 })).toEqual([]);
    expect(dueRuns({ ...BASE, now: D('2026-01-02T00:00:00Z') - 1, catchup: false })).toEqual([]);
  });

  it('without catchup returns only the latest complete interval', () => {
    expect(dueRuns({ ...BASE, catchup: false })).toEqual([
      run('2026-01-03T00:00:00Z', '2026-01-04T00:00:00Z'),
    ]);
  });

  it('never returns an interval at or before lastLogicalDate', () => {
    const last = D('2026-01-02T00:00:00Z');
    expect(dueRuns({ ...BASE, lastLogicalDate: last })).toEqual([
      run('2026-01-03T00:00:00Z', '2026-01-04T00:00:00Z'),
    ]);
    expect(dueRuns({ ...BASE, lastLogicalDate: D('2026-01-03T00:00:00Z') })).toEqual([]);
    expect(
      dueRuns({ ...BASE, lastLogicalDate: D('2026-01-03T00:00:00Z'), catchup: false }),
    ).toEqual([]);
  });

  it('after a gap without catchup skips straight to the latest interval', () => {
    expect(
      dueRuns({
        ...BASE,
        catchup: false,
        lastLogicalDate: D('2026-01-01T00:00:00Z'),
        now: D('2026-01-10T01:00:00Z'),
      }),
    ).toEqual([run('2026-01-09T00:00:00Z', '2026-01-10T00:00:00Z')]);
  });

  it('honours limit, and the next call continues where it stopped', () => {
    const first = dueRuns({ ...BASE, limit: 2 });
    expect(first).toEqual([
      run('2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z'),
      run('2026-01-02T00:00:00Z', '2026-01-03T00:00:00Z'),
    ]);
    expect(dueRuns({ ...BASE, limit: 2, lastLogicalDate: first[1]!.logicalDate })).toEqual([
      run('2026-01-03T00:00:00Z', '2026-01-04T00:00:00Z'),
    ]);
    expect(dueRuns({ ...BASE, limit: 0 })).toEqual([]);
    expect(dueRuns({ ...BASE, limit: 0, catchup: false })).toEqual([]);
  });

  it('never returns an interval ending after endDate', () => {
    const endDate = D('2026-01-03T00:00:00Z');
    expect(dueRuns({ ...BASE, endDate })).toEqual([
      run('2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z'),
      run('2026-01-02T00:00:00Z', '2026-01-03T00:00:00Z'),
    ]);
    expect(dueRuns({ ...BASE, endDate, catchup: false })).toEqual([
      run('2026-01-02T00:00:00Z', '2026-01-03T00:00:00Z'),
    ]);
    expect(dueRuns({ ...BASE, endDate: endDate - 1, catchup: false })).toEqual([
      run('2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z'),
    ]);
    expect(dueRuns({ ...BASE, endDate: D('2026-01-01T12:00:00Z') })).toEqual([]);
  });

  it('returns nothing before the first interval completes or for a future startDate', () => {
    expect(dueRuns({ ...BASE, now: D('2026-01-01T12:00:00Z') })).toEqual([]);
    expect(dueRuns({ ...BASE, startDate: D('2026-02-01T00:00:00Z') })).toEqual([]);
    expect(dueRuns({ ...BASE, startDate: D('2026-02-01T00:00:00Z'), catchup: false })).toEqual([]);
  });

  it('without startDate never catches up from the epoch: only the latest complete interval', () => {
    const now = D('2026-01-04T12:34:00Z');
    const want = [run('2026-01-04T11:00:00Z', '2026-01-04T12:00:00Z')];
    for (const catchup of [true, false]) {
      expect(dueRuns({ ...BASE, schedule: '@hourly', startDate: null, catchup, now })).toEqual(
        want,
      );
    }
  });

  it('without startDate but with a last run, catchup resumes after it and no-catchup skips ahead', () => {
    const input = {
      ...BASE,
      schedule: '@hourly',
      startDate: null,
      lastLogicalDate: D('2026-01-04T08:00:00Z'),
      now: D('2026-01-04T12:34:00Z'),
    };
    expect(dueRuns(input).map((r) => new Date(r.logicalDate).toISOString())).toEqual([
      '2026-01-04T09:00:00.000Z',
      '2026-01-04T10:00:00.000Z',
      '2026-01-04T11:00:00.000Z',
    ]);
    expect(dueRuns({ ...input, catchup: false })).toEqual([
      run('2026-01-04T11:00:00Z', '2026-01-04T12:00:00Z'),
    ]);
  });

  it('takes the later of startDate and lastLogicalDate as the bound', () => {
    // startDate moved forward past the last run: the gap is not filled.
    expect(
      dueRuns({
        ...BASE,
        lastLogicalDate: D('2025-12-01T00:00:00Z'),
        startDate: D('2026-01-03T00:00:00Z'),
      }),
    ).toEqual([run('2026-01-03T00:00:00Z', '2026-01-04T00:00:00Z')]);
  });

  it('resumes after a lastLogicalDate that is off the grid (schedule changed)', () => {
    expect(dueRuns({ ...BASE, lastLogicalDate: D('2026-01-02T13:00:00Z') })).toEqual([
      run('2026-01-03T00:00:00Z', '2026-01-04T00:00:00Z'),
    ]);
  });

  it('plans nothing for a manual-only DAG or a line that never fires', () => {
    expect(dueRuns({ ...BASE, schedule: null })).toEqual([]);
    expect(dueRuns({ ...BASE, schedule: '0 0 30 2 *' })).toEqual([]);
    expect(dueRuns({ ...BASE, schedule: '0 0 30 2 *', catchup: false })).toEqual([]);
  });

  describe('@once', () => {
    const once = { ...BASE, schedule: '@once' };
    it('runs exactly once at startDate when it has passed', () => {
      const at = D('2026-01-01T00:00:00Z');
      expect(dueRuns(once)).toEqual([
        { logicalDate: at, dataIntervalStart: at, dataIntervalEnd: at },
      ]);
      expect(dueRuns({ ...once, catchup: false })).toHaveLength(1);
      expect(dueRuns({ ...once, lastLogicalDate: at })).toEqual([]);
    });

    it('waits for a future startDate and uses now without one', () => {
      expect(dueRuns({ ...once, startDate: D('2026-02-01T00:00:00Z') })).toEqual([]);
      const now = BASE.now;
      expect(dueRuns({ ...once, startDate: null })).toEqual([
        { logicalDate: now, dataIntervalStart: now, dataIntervalEnd: now },
      ]);
      expect(dueRuns({ ...once, startDate: null, lastLogicalDate: 0 })).toEqual([]);
    });

    it('respects endDate and limit 0', () => {
      expect(dueRuns({ ...once, endDate: D('2025-12-31T00:00:00Z') })).toEqual([]);
      expect(dueRuns({ ...once, limit: 0 })).toEqual([]);
    });
  });

  it('rejects a negative or fractional limit and non-finite instants', () => {
    const code = expect.objectContaining({ code: 'LF_INVALID_ARGUMENT' });
    expect(() => dueRuns({ ...BASE, limit: -1 })).toThrow(code);
    expect(() => dueRuns({ ...BASE, limit: 1.5 })).toThrow(code);
    expect(() => dueRuns({ ...BASE, now: Number.NaN })).toThrow(code);
    expect(() => dueRuns({ ...BASE, startDate: Number.POSITIVE_INFINITY })).toThrow(code);
  });
});

describe('run ids', () => {
  it('formats scheduled run ids from the logical date', () => {
    expect(scheduledRunId(D('2026-01-01T00:00:00Z'))).toBe('scheduled__2026-01-01T00:00:00.000Z');
  });

  it('formats manual run ids with an optional suffix', () => {
    const now = D('2026-08-20T12:00:00.123Z');
    expect(manualRunId(now)).toBe('manual__2026-08-20T12:00:00.123Z');
    expect(manualRunId(now, '')).toBe('manual__2026-08-20T12:00:00.123Z');
    expect(manualRunId(now, 'a1b2')).toBe('manual__2026-08-20T12:00:00.123Z__a1b2');
    expect(() => manualRunId(now, 'has space')).toThrow(
      expect.objectContaining({ code: 'LF_INVALID_ARGUMENT' }),
    );
  });

  it('rejects instants that have no ISO form', () => {
    expect(() => scheduledRunId(Number.NaN)).toThrow(
      expect.objectContaining({ code: 'LF_INVALID_ARGUMENT' }),
    );
    expect(() => scheduledRunId(8.64e15 + 1)).toThrow(
      expect.objectContaining({ code: 'LF_INVALID_ARGUMENT' }),
    );
  });
});

// ---- properties over random cron lines and zones ----

const ZONES = [
  'UTC',
  'America/New_York',
  'Europe/Berlin',
  'Asia/Kolkata', // +05:30, no DST
  'Australia/Lord_Howe', // 30-minute DST shift
  'America/Sao_Paulo', // DST until 2019, at midnight
  'Pacific/Chatham', // +12:45 / +13:45
] as const;

const minuteArb = fc.constantFrom('*', '*/15', '0', '30', '0,30', '5-10', '*/7', '45');
const sparseMinuteArb = fc.constantFrom('0', '30', '0,30', '45', '5-7');
const hourArb = fc.constantFrom('*', '*/2', '2', '1,13', '0-5', '3', '23', '*/5');
const domArb = fc.constantFrom('*', '*', '1', '15', '1-10', '*/3', '31', '29');
const monthArb = fc.constantFrom('*', '*', '2', '*/3', '1,7', '11', '3,10');
const dowArb = fc.constantFrom('*', '*', '0', '1-5', '6', '3');

const cronArb = fc
  .tuple(minuteArb, hourArb, domArb, monthArb, dowArb)
  .map((parts) => parts.join(' '));
const denseEnoughCronArb = fc
  .tuple(
    sparseMinuteArb,
    hourArb,
    fc.constantFrom('*', '*/2'),
    fc.constant('*'),
    fc.constantFrom('*', '1-5'),
  )
  .map((parts) => parts.join(' '));
const zoneArb = fc.constantFrom(...ZONES);
const instantArb = fc.integer({ min: D('1995-01-01T00:00:00Z'), max: D('2045-01-01T00:00:00Z') });

function assertContiguous(runs: DueRun[]): void {
  for (const r of runs) {
    expect(r.logicalDate).toBe(r.dataIntervalStart);
    expect(r.dataIntervalEnd).toBeGreaterThan(r.dataIntervalStart);
  }
  for (let i = 1; i < runs.length; i++) {
    expect(runs[i]!.dataIntervalStart).toBe(runs[i - 1]!.dataIntervalEnd);
  }
}

describe('timetable properties', () => {
  it('nextFireAfter is strictly increasing', () => {
    fc.assert(
      fc.property(cronArb, zoneArb, instantArb, (cron, tz, t) => {
        let prev = t;
        for (let i = 0; i < 15; i++) {
          const next = nextFireAfter(cron, tz, prev);
          if (next === null) return;
          expect(next).toBeGreaterThan(prev);
          prev = next;
        }
      }),
      { numRuns: 300 },
    );
  });

  it('nextFireAfter is monotone in its argument and lands on fires', () => {
    fc.assert(
      fc.property(
        cronArb,
        zoneArb,
        instantArb,
        fc.integer({ min: 0, max: 40 * DAY }),
        (cron, tz, a, gap) => {
          const fa = nextFireAfter(cron, tz, a);
          const fb = nextFireAfter(cron, tz, a + gap);
          if (fa === null || fb === null) return;
          expect(fb).toBeGreaterThanOrEqual(fa);
          expect(nextFireAfter(cron, tz, fa - 1)).toBe(fa);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('lastFireAtOrBefore is the fire just before nextFireAfter', () => {
    fc.assert(
      fc.property(cronArb, zoneArb, instantArb, (cron, tz, t) => {
        const p = lastFireAtOrBefore(cron, tz, t);
        if (p === null) return;
        expect(p).toBeLessThanOrEqual(t);
        expect(nextFireAfter(cron, tz, p - 1)).toBe(p);
        const after = nextFireAfter(cron, tz, p);
        if (after !== null) expect(after).toBeGreaterThan(t);
      }),
      { numRuns: 300 },
    );
  });

  it('dueRuns with catchup is strictly increasing, contiguous, bounded and made of real fires', () => {
    fc.assert(
      fc.property(
        cronArb,
        zoneArb,
        instantArb,
        fc.integer({ min: 0, max: 90 * DAY }),
        fc.option(fc.integer({ min: 0, max: 120 * DAY }), { nil: null }),
        fc.option(fc.integer({ min: -10 * DAY, max: 60 * DAY }), { nil: null }),
        fc.boolean(),
        fc.integer({ min: 1, max: 40 }),
        (cron, tz, anchor, span, endOff, lastOff, withStart, limit) => {
          const input: DueRunsInput = {
            schedule: cron,
            timezone: tz,
            startDate: withStart ? anchor : null,
            endDate: endOff === null ? null : anchor + endOff,
            catchup: true,
            lastLogicalDate: lastOff === null ? null : anchor + lastOff,
            now: anchor + span,
            limit,
          };
          const runs = dueRuns(input);
          const horizon = Math.min(input.now, input.endDate ?? Number.POSITIVE_INFINITY);
          expect(runs.length).toBeLessThanOrEqual(limit);
          assertContiguous(runs);
          for (const r of runs) {
            expect(nextFireAfter(cron, tz, r.dataIntervalStart - 1)).toBe(r.dataIntervalStart);
            expect(nextFireAfter(cron, tz, r.dataIntervalStart)).toBe(r.dataIntervalEnd);
            expect(r.dataIntervalEnd).toBeLessThanOrEqual(horizon);
            if (input.startDate !== null)
              expect(r.logicalDate).toBeGreaterThanOrEqual(input.startDate);
            if (input.lastLogicalDate !== null) {
              expect(r.logicalDate).toBeGreaterThan(input.lastLogicalDate);
            }
          }
          if (input.startDate !== null || input.lastLogicalDate !== null) {
            // Nothing skipped at the front, nothing due left at the back (unless limited).
            const first = nextFireAfter(
              cron,
              tz,
              Math.max(input.lastLogicalDate ?? -Infinity, (input.startDate ?? -Infinity) - 1),
            );
            if (runs.length > 0) expect(runs[0]!.dataIntervalStart).toBe(first);
            if (runs.length < limit) {
              const from = runs.length > 0 ? runs[runs.length - 1]!.dataIntervalEnd : first;
              const nextEnd = from === null ? null : nextFireAfter(cron, tz, from);
              if (nextEnd !== null) expect(nextEnd).toBeGreaterThan(horizon);
            }
          } else {
            expect(runs.length).toBeLessThanOrEqual(1);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('dueRuns without catchup is exactly the last interval catchup would produce', () => {
    fc.assert(
      fc.property(
        denseEnoughCronArb,
        zoneArb,
        instantArb,
        fc.integer({ min: 0, max: 3 * DAY }),
        fc.option(fc.integer({ min: 0, max: 3 * DAY }), { nil: null }),
        fc.option(fc.integer({ min: -DAY, max: 2 * DAY }), { nil: null }),
        (cron, tz, startDate, span, endOff, lastOff) => {
          const input: DueRunsInput = {
            schedule: cron,
            timezone: tz,
            startDate,
            endDate: endOff === null ? null : startDate + endOff,
            catchup: true,
            lastLogicalDate: lastOff === null ? null : startDate + lastOff,
            now: startDate + span,
            limit: 100_000,
          };
          const all = dueRuns(input);
          const latest = dueRuns({ ...input, catchup: false, limit: 1 });
          expect(latest).toEqual(all.length > 0 ? [all[all.length - 1]] : []);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('dueRuns output is contiguous across successive ticks that feed back lastLogicalDate', () => {
    fc.assert(
      fc.property(
        cronArb,
        zoneArb,
        instantArb,
        fc.array(fc.integer({ min: 0, max: 5 * DAY }), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 5 }),
        (cron, tz, startDate, steps, limit) => {
          let now = startDate;
          let last: number | null = null;
          const seen: DueRun[] = [];
          for (const step of steps) {
            now += step;
            const runs = dueRuns({
              schedule: cron,
              timezone: tz,
              startDate,
              endDate: null,
              catchup: true,
              lastLogicalDate: last,
              now,
              limit,
            });
            seen.push(...runs);
            if (runs.length > 0) last = runs[runs.length - 1]!.logicalDate;
          }
          assertContiguous(seen);
        },
      ),
      { numRuns: 150 },
    );
  });
});
