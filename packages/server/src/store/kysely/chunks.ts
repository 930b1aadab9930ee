// Well under SQLite's 32766 bound-parameter limit for the widest table (19 columns).
export const INSERT_CHUNK = 500;
// Names per `in (...)` list: far below both dialects' bound-parameter limits.
export const IN_CHUNK = 500;

export function unique(items: readonly string[]): string[] {
  return [...new Set(items)];
}

export function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
