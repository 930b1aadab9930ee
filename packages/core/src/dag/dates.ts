/**
 * start_date / end_date handling. Authors write `2026-01-01`, `2026-01-01 06:00`,
 * `2026-01-01T06:00:00+02:00`…; the compiled spec always holds one form, RFC 3339 in UTC with
 * milliseconds (`2026-01-01T04:00:00.000Z`), so the scheduler never parses author text.
 */

const CANONICAL_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

// Date, optional time (T, t or spaces as separator, as YAML 1.1 timestamps allow), optional
// offset (Z or ±H, ±HH, ±HHMM, ±HH:MM, optionally after spaces).
const AUTHOR_RE =
  /^(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:[Tt]|[ \t]+)(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(?:[ \t]*(Z|z|[+-]\d{1,2}(?::?\d{2})?))?)?$/;

export type DateParse = { ok: true; iso: string } | { ok: false; reason: string };

/** True for exactly the form the compiler writes, naming a real instant. */
export function isCanonicalTimestamp(s: string): boolean {
  if (!CANONICAL_RE.test(s)) return false;
  const ms = Date.parse(s);
  return !Number.isNaN(ms) && new Date(ms).toISOString() === s;
}

function daysInMonth(year: number, month: number): number {
  return [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
}

function isLeap(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}

// Date.UTC maps years 0–99 to 1900–1999; setUTCFullYear does not.
function utcMs(
  y: number,
  mo: number,
  d: number,
  h: number,
  mi: number,
  s: number,
  ms: number,
): number {
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, ms);
  return date.getTime();
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** Offset of `timeZone` from UTC at instant `ms`, in milliseconds (east positive). */
export function timeZoneOffsetMs(ms: number, timeZone: string): number {
  const parts: Record<string, number> = {};
  for (const p of formatterFor(timeZone).formatToParts(new Date(ms))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  const wall = utcMs(
    parts.year ?? 1970,
    parts.month ?? 1,
    parts.day ?? 1,
    parts.hour ?? 0,
    parts.minute ?? 0,
    parts.second ?? 0,
    0,
  );
  return wall - (ms - (((ms % 1000) + 1000) % 1000));
}

/**
 * The UTC instant at which clocks in `timeZone` show `wallMs` (a wall time encoded as if it
 * were UTC). A wall time skipped by a DST jump moves forward by the jump; a repeated one takes
 * the first occurrence.
 */
export function wallTimeToUtc(wallMs: number, timeZone: string): number {
  const o1 = timeZoneOffsetMs(wallMs, timeZone);
  const guess = wallMs - o1;
  const o2 = timeZoneOffsetMs(guess, timeZone);
  if (o1 === o2) {
    // Fall-back ambiguity: an hour earlier may show the same wall time under the earlier offset.
    const earlier = wallMs - Math.max(o1, timeZoneOffsetMs(guess - 3_600_000, timeZone));
    return timeZoneOffsetMs(earlier, timeZone) + earlier === wallMs ? earlier : guess;
  }
  const second = wallMs - o2;
  const o3 = timeZoneOffsetMs(second, timeZone);
  if (o2 === o3) return second;
  return wallMs - Math.min(o2, o3);
}

/**
 * Parses an author-written date. Without an explicit offset the wall time is read in
 * `timeZone` (the DAG's schedule_timezone), as Airflow does for naive dates.
 */
export function parseAuthorDate(text: string, timeZone: string): DateParse {
  const m = AUTHOR_RE.exec(text.trim());
  if (!m) {
    return {
      ok: false,
      reason: `"${text}" is not a date; use YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] or RFC 3339 with an offset`,
    };
  }
  const [, ys, mos, ds, hs, mis, ss, frac, off] = m;
  const y = Number(ys);
  const mo = Number(mos);
  const d = Number(ds);
  const h = Number(hs ?? 0);
  const mi = Number(mis ?? 0);
  const s = Number(ss ?? 0);
  // Millisecond precision: extra fraction digits are cut, never rounded into the next second.
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  if (y < 1) return { ok: false, reason: `year ${ys} is out of range (0001–9999)` };
  if (mo < 1 || mo > 12) return { ok: false, reason: `month ${mos} is out of range (01–12)` };
  if (d < 1 || d > daysInMonth(y, mo)) {
    return {
      ok: false,
      reason: `day ${ds} does not exist in ${ys}-${String(mo).padStart(2, '0')}`,
    };
  }
  if (h > 23) return { ok: false, reason: `hour ${hs} is out of range (00–23)` };
  if (mi > 59) return { ok: false, reason: `minute ${mis} is out of range (00–59)` };
  if (s > 59) return { ok: false, reason: `second ${ss} is out of range (00–59)` };
  const wall = utcMs(y, mo, d, h, mi, s, ms);
  let instant: number;
  if (off === undefined) {
    instant = wallTimeToUtc(wall, timeZone);
  } else if (off === 'Z' || off === 'z') {
    instant = wall;
  } else {
    const om = /^([+-])(\d{1,2}):?(\d{2})?$/.exec(off);
    const oh = Number(om?.[2] ?? 0);
    const omin = Number(om?.[3] ?? 0);
    if (oh > 23 || omin > 59) return { ok: false, reason: `offset ${off} is out of range` };
    const sign = om?.[1] === '-' ? -1 : 1;
    instant = wall - sign * (oh * 60 + omin) * 60_000;
  }
  const iso = new Date(instant).toISOString();
  if (!CANONICAL_RE.test(iso))
    return { ok: false, reason: `"${text}" is outside years 0001–9999 in UTC` };
  return { ok: true, iso };
}
