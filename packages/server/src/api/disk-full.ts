/**
 * Whether an error (or one of its causes) is the store running out of space: SQLite's
 * SQLITE_FULL (better-sqlite3 names the result code), PostgreSQL's disk_full (SQLSTATE 53100), or
 * the filesystem's ENOSPC. Such a write was rolled back whole, so the request changed nothing.
 */
export function isDiskFull(err: unknown): boolean {
  const seen = new Set<unknown>();
  let cur: unknown = err;
  while (typeof cur === 'object' && cur !== null && !seen.has(cur)) {
    seen.add(cur);
    const code = (cur as { code?: unknown }).code;
    if (code === 'SQLITE_FULL' || code === '53100' || code === 'ENOSPC') return true;
    cur = (cur as { cause?: unknown }).cause;
  }
  return false;
}
