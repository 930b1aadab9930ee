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

const ASCII = /^[\u0000-\u007f]*$/;

/** What `quote` (and, with `+` for a space, `quote_plus`) writes for each ASCII code unit. */
function asciiTable(space: string): readonly string[] {
  return Array.from({ length: 128 }, (_, c) => {
    const ch = String.fromCharCode(c);
    if (UNRESERVED.test(ch)) return ch;
    if (c === 0x20) return space;
    return '%' + c.toString(16).toUpperCase().padStart(2, '0');
  });
}
const QUOTE_TABLE = asciiTable('%20');
const QUOTE_PLUS_TABLE = asciiTable('+');

function quoteWith(s: string, table: readonly string[]): string {
  // The common case on the secret-delivery path: return the string itself, no allocation.
  if (UNRESERVED.test(s)) return s;
  if (ASCII.test(s)) {
    // One pass, no regex fix-ups: passwords and Python's ensure_ascii JSON are ASCII.
    let out = '';
    for (let i = 0; i < s.length; i++) out += table[s.charCodeAt(i)]!;
    return out;
  }
  // encodeURIComponent also leaves ! ' ( ) * alone; Python escapes them.
  const q = encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase(),
  );
  return table === QUOTE_PLUS_TABLE && q.includes('%20') ? q.replace(/%20/g, '+') : q;
}

/**
 * Python's `quote(s, safe='')`: everything but `A-Z a-z 0-9 _ . - ~` is escaped. The caller
 * guarantees `s` is well formed (encodeURIComponent throws on lone surrogates).
 */
export function quote(s: string): string {
  return quoteWith(s, QUOTE_TABLE);
}

/** Python's `quote_plus(s, safe='')`, the encoder `urlencode` uses: space becomes `+`. */
export function quotePlus(s: string): string {
  return quoteWith(s, QUOTE_PLUS_TABLE);
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
