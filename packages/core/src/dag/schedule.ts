import { Cron } from 'croner';
import { didYouMean } from './diagnostics.js';

/** Presets the compiled spec may hold; aliases are rewritten to these. */
export const NORMAL_PRESETS = [
  '@once',
  '@hourly',
  '@daily',
  '@weekly',
  '@monthly',
  '@yearly',
] as const;

const PRESET_ALIASES: Record<string, string> = { '@annually': '@yearly', '@midnight': '@daily' };

export type ScheduleCheck =
  { ok: true; schedule: string } | { ok: false; message: string; hint: string };

const PRESET_HINT =
  'write a 5-field cron expression such as "0 6 * * *", one of @hourly @daily @weekly @monthly @yearly, @once, or null for manual runs only';

/**
 * Normalises an author schedule (trimmed, single spaces, preset aliases and case folded) and
 * checks it with croner — the same parser the scheduler evaluates it with — so a DAG that
 * compiles is a DAG the scheduler can run.
 */
export function normalizeSchedule(raw: string): ScheduleCheck {
  const text = raw.trim().replace(/\s+/g, ' ');
  if (text.startsWith('@')) {
    const lower = text.toLowerCase();
    const preset = PRESET_ALIASES[lower] ?? lower;
    if ((NORMAL_PRESETS as readonly string[]).includes(preset))
      return { ok: true, schedule: preset };
    return { ok: false, message: `"${raw}" is not a schedule preset`, hint: PRESET_HINT };
  }
  const fields = text === '' ? [] : text.split(' ');
  if (['none', 'null', 'manual', '~'].includes(text.toLowerCase())) {
    return {
      ok: false,
      message: `"${raw}" is a string, not "no schedule"`,
      hint: 'write schedule: null (unquoted) or remove the key for a manually triggered DAG',
    };
  }
  if (fields.length !== 5) {
    const why =
      fields.length === 6 || fields.length === 7
        ? ' (Leoflow schedules have minute precision: no seconds or year field)'
        : '';
    return {
      ok: false,
      message: `cron expression "${raw}" has ${fields.length} field(s); exactly 5 are required${why}`,
      hint: 'minute hour day-of-month month day-of-week, e.g. "30 2 * * 1-5"',
    };
  }
  let job: Cron;
  try {
    // paused + no callback: croner only parses, it never arms a timer.
    job = new Cron(text, { paused: true, mode: '5-part' });
  } catch (e) {
    const detail = e instanceof Error ? e.message.replace(/^CronPattern: /, '') : String(e);
    return {
      ok: false,
      message: `cron expression "${raw}" is invalid: ${detail}`,
      hint: PRESET_HINT,
    };
  }
  // A fixed reference date keeps this pure; leap days still fall inside the search window.
  const next = job.nextRun(new Date(Date.UTC(2000, 0, 1)));
  if (next === null) {
    return {
      ok: false,
      message: `cron expression "${raw}" never matches a real date`,
      hint: 'check the day-of-month against the month (for example 31 in a 30-day month)',
    };
  }
  return { ok: true, schedule: text };
}

/** True for schedules exactly as the compiler writes them. */
export function isNormalizedSchedule(s: string): boolean {
  const r = normalizeSchedule(s);
  return r.ok && r.schedule === s;
}

export type TimezoneCheck = { ok: true; timezone: string } | { ok: false; hint: string };

/**
 * Validates an IANA zone with the runtime's Intl data. A name that differs from the resolved
 * one only by case is stored in its canonical spelling; links (US/Pacific) are kept as written
 * because resolving them depends on the ICU version and would make the hash unstable.
 */
export function checkTimezone(tz: string, suggestFrom?: readonly string[]): TimezoneCheck {
  try {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
    // Intl also accepts offsets such as "+01:00" on newer runtimes; those are not IANA names.
    if (/^[+-]/.test(tz)) throw new RangeError(tz);
    return { ok: true, timezone: resolved.toLowerCase() === tz.toLowerCase() ? resolved : tz };
  } catch {
    const zones = suggestFrom ?? supportedZones();
    const lower = tz.trim().toLowerCase().replace(/ /g, '_');
    const guess =
      zones.find((z) => z.toLowerCase().endsWith(`/${lower}`)) ??
      (tz.includes('/') ? didYouMean(tz, zones) : undefined);
    let hint = 'use an IANA zone name such as UTC, Europe/Paris or America/New_York';
    if (guess) hint = `did you mean "${guess}"? ${hint}`;
    return { ok: false, hint };
  }
}

function supportedZones(): readonly string[] {
  const intl = Intl as unknown as { supportedValuesOf?: (k: string) => string[] };
  try {
    return intl.supportedValuesOf?.('timeZone') ?? [];
  } catch {
    return [];
  }
}
