import { Cron } from 'croner';
import { LeoflowError, DagError } from '../errors/leoflow-error.js';
import { lastAtOrBefore } from './search.js';

/**
 * Airflow's presets, spelled out so a schedule means the same cron line whatever croner's own
 * nickname table says.
 */
export const SCHEDULE_PRESETS: Readonly<Record<string, string>> = {
  '@hourly': '0 * * * *',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@weekly': '0 0 * * 0',
  '@monthly': '0 0 1 * *',
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
};

const ONCE = '@once';

export interface DueRun {
  /** = dataIntervalStart (Airflow's logical date) */
  logicalDate: number;
  dataIntervalStart: number;
  /** the instant the run became due; equals the start only for @once */
  dataIntervalEnd: number;
}

export interface DueRunsInput {
  /** cron line, preset, '@once', or null (manual only) */
  schedule: string | null;
  /** IANA zone the cron line is read in */
  timezone: string;
  startDate: number | null;
  endDate: number | null;
  catchup: boolean;
  /** logical date of the newest *scheduled* run of this DAG (manual runs must not be passed) */
  lastLogicalDate: number | null;
  now: number;
  /** most runs to return; the caller creates them and asks again next tick */
  limit: number;
}

/**
 * Parsed crons, keyed by zone + line. Parsing dominates the cost of a fire-time lookup and a
 * scheduler asks about the same few DAGs every tick. Bounded so a stream of distinct
 * expressions (e.g. a validation endpoint) cannot grow it without limit.
 */
const CRON_CACHE = new Map<string, Cron>();
const CRON_CACHE_MAX = 512;

/** 400 years: croner's own search horizon, so a longer gap means "never fires". */
const MAX_SEARCH_BACK_MS = 400 * 366 * 24 * 3600 * 1000;

function cronLine(schedule: string): string | null {
  if (schedule === ONCE) return null;
  return SCHEDULE_PRESETS[schedule] ?? schedule;
}

function assertTimezone(timezone: string): void {
  let ok = typeof timezone === 'string' && timezone.length > 0;
  if (ok) {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    } catch {
      ok = false;
    }
  }
  if (!ok) {
    throw new DagError(
      'LF_DAG_UNKNOWN_TIMEZONE',
      `'${String(timezone)}' is not an IANA time zone; use a name such as 'UTC' or 'Europe/Berlin'.`,
      { timezone },
    );
  }
}

function cronFor(line: string, timezone: string): Cron {
  const key = `${timezone}\u0000${line}`;
  const hit = CRON_CACHE.get(key);
  if (hit !== undefined) return hit;
  assertTimezone(timezone);
  let cron: Cron;
  try {
    // No callback is passed, so croner never arms a timer: the instance is a calculator.
    // 5-part keeps the cron dialect Airflow users write (no seconds, no years).
    // 'no-wildcard' makes any schedule with fixed minutes and hours (lists and ranges
    // included, e.g. '30 1,13 * * *') a fixed-time job: in a DST gap it fires at the first
    // valid time after the gap, and on a repeated hour it fires once, as Vixie cron does.
    // Schedules with a wildcard or step in minute/hour are interval jobs and fire on every
    // instant that exists, so '0 * * * *' fires on both 01:00s of a fall-back night.
    cron = new Cron(line, {
      timezone,
      paused: true,
      mode: '5-part',
      fixedTimeRule: 'no-wildcard',
    });
  } catch (e) {
    throw new DagError(
      'LF_DAG_BAD_CRON',
      `Schedule '${line}' is not a valid 5-field cron line (${e instanceof Error ? e.message : String(e)}); ` +
        `use 'minute hour day-of-month month day-of-week', a preset ` +
        `(${Object.keys(SCHEDULE_PRESETS).join(', ')}), '@once', or null for manual runs only.`,
      { schedule: line },
    );
  }
  if (CRON_CACHE.size >= CRON_CACHE_MAX) {
    const oldest = CRON_CACHE.keys().next();
    if (oldest.done !== true) CRON_CACHE.delete(oldest.value);
  }
  CRON_CACHE.set(key, cron);
  return cron;
}

function assertMs(name: string, v: number): void {
  if (!Number.isFinite(v)) {
    throw new LeoflowError('LF_INVALID_ARGUMENT', `${name} must be finite epoch milliseconds.`, {
      [name]: v,
    });
  }
}

/**
 * Throws LF_DAG_BAD_CRON / LF_DAG_UNKNOWN_TIMEZONE if the pair could not be planned; for the
 * DAG compiler and the API to reject a DAG before the scheduler ever sees it.
 */
export function validateSchedule(schedule: string | null, timezone: string): void {
  assertTimezone(timezone);
  if (schedule === null) return;
  const line = cronLine(schedule);
  if (line !== null) cronFor(line, timezone);
}

/** First fire strictly after `afterMs`; null for manual-only, @once, or a cron that never fires again. */
function fireAfter(cron: Cron, afterMs: number): number | null {
  // croner drops the milliseconds of its input and answers strictly after that whole second.
  // Fires are whole seconds, so "strictly after the floored second" = "strictly after afterMs".
  const next = cron.nextRun(new Date(afterMs));
  return next === null ? null : next.getTime();
}

/** Latest fire at or before `atMs`, or null if none within croner's horizon. */
function fireAtOrBefore(cron: Cron, atMs: number): number | null {
  // croner's backward walk is fast but is a second implementation of the calendar; its
  // answer is accepted only once the forward walk (the one everything else uses) proves it:
  // p is a fire and nothing fires in (p, atMs]. Otherwise search with the forward walk alone,
  // so both directions agree by construction, DST included.
  const [guess] = cron.previousRuns(1, new Date(atMs + 1));
  if (guess !== undefined) {
    const p = guess.getTime();
    if (p <= atMs && fireAfter(cron, p - 1) === p) {
      const after = fireAfter(cron, p);
      if (after === null || after > atMs) return p;
    }
  }
  return lastAtOrBefore((x) => fireAfter(cron, x), atMs, MAX_SEARCH_BACK_MS);
}

/**
 * The schedule's first fire strictly after `afterMs` in `timezone`. null for a manual-only
 * (null) schedule, for @once, and for a cron line that never fires again.
 */
export function nextFireAfter(
  schedule: string | null,
  timezone: string,
  afterMs: number,
): number | null {
  assertMs('afterMs', afterMs);
  if (schedule === null) return null;
  const line = cronLine(schedule);
  if (line === null) return null;
  return fireAfter(cronFor(line, timezone), afterMs);
}

/**
 * The schedule's latest fire at or before `atMs`. null for manual-only, @once, or when the
 * cron line has not fired within the last 400 years.
 */
export function lastFireAtOrBefore(
  schedule: string | null,
  timezone: string,
  atMs: number,
): number | null {
  assertMs('atMs', atMs);
  if (schedule === null) return null;
  const line = cronLine(schedule);
  if (line === null) return null;
  return fireAtOrBefore(cronFor(line, timezone), atMs);
}

/**
 * The scheduled runs that are due at `now`, oldest first, using Airflow's data-interval model.
 *
 * Fires t0 < t1 < … of the schedule cut time into intervals [t_i, t_{i+1}); the run for an
 * interval has logicalDate = t_i and becomes due at t_{i+1}, when its data is complete.
 *
 * Where the first interval starts:
 * - after lastLogicalDate: the first fire strictly after it (never an interval ≤ it), and
 * - with startDate: never before the first fire ≥ startDate.
 * - With neither: only the latest complete interval, so a new DAG without a start date never
 *   catches up from the epoch.
 *
 * catchup=false returns at most the latest complete interval (missed ones are skipped), and
 * nothing if that interval starts before the bounds above. catchup=true returns every complete
 * interval from the first one on, in order, at most `limit`. With no startDate but a
 * lastLogicalDate, catchup=true resumes after lastLogicalDate (e.g. after the DAG was paused).
 * No interval ends after endDate or after now.
 *
 * @once: a single run with logicalDate = startDate ?? now and a zero-length interval, due once
 * now ≥ logicalDate, and only while lastLogicalDate is null.
 *
 * The output is strictly increasing and contiguous (each end = the next start).
 */
export function dueRuns(input: DueRunsInput): DueRun[] {
  const { schedule, timezone, startDate, endDate, catchup, lastLogicalDate, now, limit } = input;
  assertMs('now', now);
  if (startDate !== null) assertMs('startDate', startDate);
  if (endDate !== null) assertMs('endDate', endDate);
  if (lastLogicalDate !== null) assertMs('lastLogicalDate', lastLogicalDate);
  if (!Number.isInteger(limit) || limit < 0) {
    throw new LeoflowError('LF_INVALID_ARGUMENT', 'limit must be a whole number ≥ 0.', { limit });
  }
  assertTimezone(timezone);
  if (schedule === null || limit === 0) return [];

  const line = cronLine(schedule);
  if (line === null) {
    if (lastLogicalDate !== null) return [];
    const at = startDate ?? now;
    if (at > now || (endDate !== null && at > endDate)) return [];
    return [{ logicalDate: at, dataIntervalStart: at, dataIntervalEnd: at }];
  }

  const cron = cronFor(line, timezone);
  const horizon = endDate === null ? now : Math.min(now, endDate);

  // First permitted interval start, if anything bounds it from below.
  let first: number | undefined;
  if (lastLogicalDate !== null || startDate !== null) {
    const after = Math.max(
      lastLogicalDate ?? Number.NEGATIVE_INFINITY,
      startDate === null ? Number.NEGATIVE_INFINITY : startDate - 1,
    );
    const f = fireAfter(cron, after);
    if (f === null) return [];
    first = f;
  }

  if (!catchup || first === undefined) {
    const end = fireAtOrBefore(cron, horizon);
    if (end === null) return [];
    const start = fireAtOrBefore(cron, end - 1);
    if (start === null) return [];
    if (first !== undefined && start < first) return [];
    return [{ logicalDate: start, dataIntervalStart: start, dataIntervalEnd: end }];
  }

  const out: DueRun[] = [];
  let start = first;
  while (out.length < limit) {
    const end = fireAfter(cron, start);
    if (end === null || end > horizon) break;
    out.push({ logicalDate: start, dataIntervalStart: start, dataIntervalEnd: end });
    start = end;
  }
  return out;
}

/** Run id of the scheduled run for `logicalDate`: `scheduled__2026-01-01T00:00:00.000Z`. */
export function scheduledRunId(logicalDate: number): string {
  return `scheduled__${isoOf('logicalDate', logicalDate)}`;
}

const SUFFIX_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Run id of a manually triggered run: `manual__<ISO now>`, or `manual__<ISO now>__<suffix>`
 * when two triggers may land in the same millisecond and the caller must keep them apart.
 */
export function manualRunId(now: number, suffix?: string): string {
  const base = `manual__${isoOf('now', now)}`;
  if (suffix === undefined || suffix === '') return base;
  if (!SUFFIX_PATTERN.test(suffix)) {
    throw new LeoflowError(
      'LF_INVALID_ARGUMENT',
      'A manual run id suffix must be 1–64 characters of letters, digits, _, . or -.',
      { suffix },
    );
  }
  return `${base}__${suffix}`;
}

function isoOf(name: string, ms: number): string {
  assertMs(name, ms);
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) {
    throw new LeoflowError('LF_INVALID_ARGUMENT', `${name} is outside the representable dates.`, {
      [name]: ms,
    });
  }
  return d.toISOString();
}
