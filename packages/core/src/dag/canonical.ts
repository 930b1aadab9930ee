import { sha256Hex } from './sha256.js';
import type { DagSpec } from './spec.js';

/**
 * Canonical JSON in the spirit of RFC 8785 (JCS): object keys sorted by UTF-16 code units, no
 * whitespace, numbers and strings as JSON.stringify writes them. Two specs that differ only in
 * key order therefore serialise — and hash — identically.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    const s = JSON.stringify(value);
    // undefined, functions and symbols have no JSON form; a hash must not silently skip them.
    if (s === undefined) throw new TypeError(`canonicalJson: ${typeof value} has no JSON form`);
    return s;
  }
  if (Array.isArray(value)) {
    return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  }
  const obj = value as Record<string, unknown>;
  const parts: string[] = [];
  for (const key of Object.keys(obj).sort()) {
    const v = obj[key];
    if (v === undefined) continue; // same as JSON.stringify: an undefined member is absent
    parts.push(`${JSON.stringify(key)}:${canonicalJson(v)}`);
  }
  return `{${parts.join(',')}}`;
}

/**
 * Content hash of a compiled DAG: lower-case hex SHA-256 of its canonical JSON. Registration
 * uses it to tell "same DAG pushed again" from "new version".
 */
export function dagSpecHash(spec: DagSpec): string {
  return sha256Hex(canonicalJson(spec));
}
