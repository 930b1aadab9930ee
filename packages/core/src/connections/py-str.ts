/**
 * Python's `str.strip()` with no argument: it removes what `str.isspace()` calls whitespace,
 * which is not JavaScript's `trim()` set — Python counts U+001C-U+001F and U+0085, JavaScript
 * counts U+FEFF (a byte-order mark). Airflow strips an `AIRFLOW_CONN_*` value this way before
 * deciding between its JSON and URI forms, and `int()` strips a port string this way.
 */
const PY_SPACE =
  '\\t\\n\\u000b\\f\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const PY_STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, 'g');

export function pyStrip(s: string): string {
  return s.replace(PY_STRIP, '');
}
