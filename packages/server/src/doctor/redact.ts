/** Shown in place of a password or any other secret part of a setting. */
export const REDACTED = '***';

const SECRET_PARAM = /pass|secret|token|key/i;

/**
 * A database URL fit to print: the password (and any query parameter that looks like one:
 * `password=`, `sslkey=`, …) replaced by `***`. An unparseable URL is not shown at all, since
 * there is no telling which part of it is the password.
 */
export function redactDatabaseUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return '(unparseable URL, not shown)';
  }
  if (u.password !== '') u.password = REDACTED;
  for (const name of [...new Set(u.searchParams.keys())]) {
    if (SECRET_PARAM.test(name)) u.searchParams.set(name, REDACTED);
  }
  return u.toString();
}

/** True when the URL carries a password (in its authority or a password-like parameter). */
export function databaseUrlHasPassword(url: string): boolean {
  return databaseUrlSecrets(url).length > 0;
}

/**
 * Every string of a database URL that must never be printed: the password as written and
 * decoded, password-like query parameter values, and the URL itself. Used to scrub messages
 * (a driver error could quote any of them) before they reach a report.
 */
export function databaseUrlSecrets(url: string): string[] {
  const out = new Set<string>();
  let u: URL | null = null;
  try {
    u = new URL(url);
  } catch {
    u = null;
  }
  if (u === null) return url === '' ? [] : [url];
  if (u.password !== '') {
    out.add(u.password);
    out.add(safeDecode(u.password));
  }
  for (const [name, value] of u.searchParams) {
    if (SECRET_PARAM.test(name) && value !== '') out.add(value);
  }
  if (out.size > 0) out.add(url);
  return [...out].filter((s) => s !== '');
}

/** Replaces every occurrence of each secret in text with `***` (longest first). */
export function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of [...secrets].sort((a, b) => b.length - a.length)) {
    if (s !== '') out = out.split(s).join(REDACTED);
  }
  return out;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
