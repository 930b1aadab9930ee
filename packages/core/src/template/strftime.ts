/**
 * The date directives of Python's strftime/strptime that `ds_format` supports, for UTC dates
 * with C-locale names (what Airflow's `macros.ds_format` gives on a task host with the default
 * locale). Any other directive is refused, never guessed.
 */

const DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];
const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];
const SUPPORTED = new Set('YymdHIMSfpjaAbBzZ%'.split(''));

function pad(n: number, w = 2): string {
  return String(n).padStart(w, '0');
}

/** The first directive (`%x`) `format` uses that is not supported, or null. */
export function unsupportedDirective(format: string): string | null {
  for (let i = 0; i < format.length; i++) {
    if (format.charAt(i) !== '%') continue;
    const d = format.charAt(i + 1);
    if (!SUPPORTED.has(d)) return `%${d}`;
    i++;
  }
  return null;
}

/** Python's strftime of a UTC date; null when the format uses an unsupported directive. */
export function pyStrftime(d: Date, format: string): string | null {
  if (unsupportedDirective(format) !== null) return null;
  const weekday = (d.getUTCDay() + 6) % 7;
  const jan1 = Date.UTC(d.getUTCFullYear(), 0, 1);
  const yday = Math.floor((d.getTime() - jan1) / 86_400_000) + 1;
  const h = d.getUTCHours();
  return format.replace(/%(.)/g, (_, c: string) => {
    switch (c) {
      case 'Y':
        return pad(d.getUTCFullYear(), 4);
      case 'y':
        return pad(d.getUTCFullYear() % 100);
      case 'm':
        return pad(d.getUTCMonth() + 1);
      case 'd':
        return pad(d.getUTCDate());
      case 'H':
        return pad(h);
      case 'I':
        return pad(h % 12 === 0 ? 12 : h % 12);
      case 'M':
        return pad(d.getUTCMinutes());
      case 'S':
        return pad(d.getUTCSeconds());
      case 'f':
        return pad(d.getUTCMilliseconds() * 1000, 6);
      case 'p':
        return h < 12 ? 'AM' : 'PM';
      case 'j':
        return pad(yday, 3);
      case 'a':
        return DAYS[weekday]!.slice(0, 3);
      case 'A':
        return DAYS[weekday]!;
      case 'b':
        return MONTHS[d.getUTCMonth()]!.slice(0, 3);
      case 'B':
        return MONTHS[d.getUTCMonth()]!;
      case 'z':
        return '';
      case 'Z':
        return '';
      default:
        return '%';
    }
  });
}

/**
 * Python's strptime for the supported directives (a naive date read as UTC); the problem as a
 * sentence when `text` does not match `format`.
 */
export function pyStrptime(text: string, format: string): Date | string {
  const bad = unsupportedDirective(format);
  if (bad !== null) return `the input format uses ${bad}, which is not supported`;
  let y = 1900;
  let mo = 1;
  let day = 1;
  let h = 0;
  let mi = 0;
  let s = 0;
  let us = 0;
  let pm: boolean | null = null;
  let i = 0;
  // Never the value in a message: it may come from a secret.
  const mismatch = `the value does not match the format ${JSON.stringify(format)}`;
  const num = (min: number, max: number): number | null => {
    const m = new RegExp(`^[0-9]{${min},${max}}`).exec(text.slice(i));
    if (!m) return null;
    i += m[0].length;
    return Number(m[0]);
  };
  const name = (names: string[], short: boolean): number | null => {
    for (const [k, n] of names.entries()) {
      const w = short ? n.slice(0, 3) : n;
      if (text.slice(i, i + w.length).toLowerCase() === w.toLowerCase()) {
        i += w.length;
        return k;
      }
    }
    return null;
  };
  for (let f = 0; f < format.length; f++) {
    const c = format.charAt(f);
    if (c !== '%') {
      if (/\s/.test(c)) {
        while (/\s/.test(text.charAt(i))) i++;
        continue;
      }
      if (text.charAt(i) !== c) return mismatch;
      i++;
      continue;
    }
    const d = format.charAt(++f);
    let v: number | null = 0;
    switch (d) {
      case 'Y':
        v = num(4, 4);
        if (v !== null) y = v;
        break;
      case 'y':
        v = num(2, 2);
        if (v !== null) y = v < 69 ? 2000 + v : 1900 + v;
        break;
      case 'm':
        v = num(1, 2);
        if (v !== null) mo = v;
        break;
      case 'd':
        v = num(1, 2);
        if (v !== null) day = v;
        break;
      case 'H':
      case 'I':
        v = num(1, 2);
        if (v !== null) h = v;
        break;
      case 'M':
        v = num(1, 2);
        if (v !== null) mi = v;
        break;
      case 'S':
        v = num(1, 2);
        if (v !== null) s = v;
        break;
      case 'f': {
        const m = /^[0-9]{1,6}/.exec(text.slice(i));
        if (m) {
          i += m[0].length;
          us = Number(m[0].padEnd(6, '0'));
        } else v = null;
        break;
      }
      case 'p': {
        const w = text.slice(i, i + 2).toUpperCase();
        if (w === 'AM' || w === 'PM') {
          pm = w === 'PM';
          i += 2;
        } else v = null;
        break;
      }
      case 'j':
        v = num(1, 3);
        break;
      case 'a':
      case 'A':
        v = name(DAYS, d === 'a');
        break;
      case 'b':
      case 'B':
        v = name(MONTHS, d === 'b');
        if (v !== null) mo = v + 1;
        break;
      case '%':
        if (text.charAt(i) === '%') i++;
        else v = null;
        break;
      default:
        // %z / %Z: accept an empty zone or +00:00 / UTC
        if (d === 'z') {
          const m = /^(?:[+-][0-9]{2}:?[0-9]{2}|Z)?/.exec(text.slice(i));
          i += m?.[0].length ?? 0;
        } else if (d === 'Z') {
          const m = /^(?:UTC|GMT)?/.exec(text.slice(i));
          i += m?.[0].length ?? 0;
        }
    }
    if (v === null) return mismatch;
  }
  if (i !== text.length) return `the value goes on past the format ${JSON.stringify(format)}`;
  if (pm !== null && h >= 1 && h <= 12) h = (h % 12) + (pm ? 12 : 0);
  const t = Date.UTC(y, mo - 1, day, h, mi, s, Math.floor(us / 1000));
  const dt = new Date(t);
  if (
    Number.isNaN(t) ||
    mo < 1 ||
    mo > 12 ||
    dt.getUTCDate() !== day ||
    h > 23 ||
    mi > 59 ||
    s > 61
  )
    return 'the value is not a valid date';
  // Years below 100: Date.UTC maps them to 19xx; set the year explicitly.
  if (y < 100) dt.setUTCFullYear(y);
  return dt;
}
