import type { DbBool } from '../db-types.js';

// Column values as the drivers hand them back, and the small write-side conversions.

/** pg hands back int8 as numbers via the pool's type parsers; this also guards stray strings. */
export function num(v: number | string | bigint): number {
  return typeof v === 'number' ? v : Number(v);
}

export function numOrNull(v: number | string | bigint | null): number | null {
  return v === null ? null : num(v);
}

export function fromBool(v: DbBool): boolean {
  return v === true || v === 1;
}

/** Whether an UPDATE/DELETE touched a row. */
export function changed(n: bigint | number | undefined): boolean {
  return n !== undefined && Number(n) > 0;
}

export function toBuffer(v: Uint8Array): Buffer {
  return Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

/** SQLite (better-sqlite3) and PostgreSQL (pg) report unique/PK violations differently. */
export function isUniqueViolation(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  return (
    code === '23505' ||
    code === 'SQLITE_CONSTRAINT_PRIMARYKEY' ||
    code === 'SQLITE_CONSTRAINT_UNIQUE'
  );
}

/** The dag_grants column as stored (JSON text) → the grants (null: every DAG). */
export function grantsOf(text: string | null): readonly string[] | null {
  return text === null ? null : (JSON.parse(text) as string[]);
}
