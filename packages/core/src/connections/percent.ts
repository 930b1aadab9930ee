/**
 * Percent-encoding exactly as Python's urllib does it, because the strings we write are read by
 * Airflow (`quote(s, safe='')`, `urlencode` → `quote_plus`) and the strings we read were written
 * by it.
 */

/** True when `s` has no lone UTF-16 surrogate, i.e. it can be encoded as UTF-8 at all. */
export function isWellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false;
    }
  }
  return true;
}

const UNRESERVED = /^[A-Za-z0-9_.~-]*$/;

/** Nothing to escape (and, being ASCII, well formed): most hosts, logins and keys. */
export function isUnreserved(s: string): boolean {
  return UNRESERVED.test(s);
}

/**
 * Python's `quote(s, safe='')`: everything but `A-Z a-z 0-9 _ . - ~` is escaped. The caller
 * guarantees `s` is well formed (encodeURIComponent throws on lone surrogates).
 */
export function quote(s: string): string {
  // The common case on the secret-delivery path: return the string itself, no allocation.
  if (UNRESERVED.test(s)) return s;
  // encodeURIComponent also leaves ! ' ( ) * alone; Python escapes them.
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase(),
  );
}

/** Python's `quote_plus(s, safe='')`, the encoder `urlencode` uses: space becomes `+`. */
export function quotePlus(s: string): string {
  const q = quote(s);
  return q.includes('%20') ? q.replace(/%20/g, '+') : q;
}

/**
 * Strict percent-decoding: a malformed escape or bytes that are not UTF-8 return null. (Python's
 * `unquote` would leave `%zz` as is and turn bad bytes into U+FFFD; silently changing a password
 * is worse than refusing it.)
 */
export function decodeStrict(s: string): string | null {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/** `parse_qsl` decoding of one name or value: `+` is a space, then strict percent-decoding. */
export function decodeQueryPart(s: string): string | null {
  return decodeStrict(s.replace(/\+/g, ' '));
}
