import { isNonSecretExtraField, MASK } from '../connections/masking.js';
import { parseConnectionUri } from '../connections/uri.js';

/**
 * The secrets masker (issue 34), as Airflow's `secrets_masker` and beyond it: every value
 * delivered to an attempt — each Variable; each Connection's URI, password, login and every extra
 * not on the non-secret list (docs/connections.md#masking) — of at least MIN_MASKED_LENGTH
 * characters, and its common encodings (JSON string escaping, URL encoding, base64 at each of its
 * three alignments in both alphabets, hex), is replaced by `***` in the attempt's log lines and
 * XCom values. A multi-line value (a PEM key) is also masked line by line, since logs are lines.
 *
 * Masking is hygiene, not the control: a task can always transform a value past any list of
 * encodings. Grants decide who receives a secret (docs/security.md).
 *
 * Matching is one pass per line with a rolling 4-gram filter built once per attempt: a bitmap
 * of the hashed first four characters of every pattern, checked at each position, and only a
 * hit compares the (few) patterns of that bucket. Pure: no I/O, no clock.
 */
export const MIN_MASKED_LENGTH = 5;

/** What an attempt was delivered: Variables by key, Connections by id as Airflow URIs. */
export interface DeliveredSecrets {
  variables?: Readonly<Record<string, string>>;
  connections?: Readonly<Record<string, string>>;
}

/** The secret strings of a delivery (before encodings), each at least MIN_MASKED_LENGTH long. */
export function secretValues(delivered: DeliveredSecrets): string[] {
  const out = new Set<string>();
  const add = (v: unknown) => {
    if (typeof v === 'string') {
      if (v.length >= MIN_MASKED_LENGTH) out.add(v);
      // logs are lines: a multi-line value is masked line by line too
      if (v.includes('\n'))
        for (const line of v.split(/\r?\n/))
          if (line.trim().length >= MIN_MASKED_LENGTH) out.add(line.trim());
    } else if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') {
      add(String(v));
    } else if (v !== null && typeof v === 'object') {
      add(JSON.stringify(v));
      for (const x of Object.values(v)) add(x);
    }
  };
  for (const v of Object.values(delivered.variables ?? {})) add(v);
  for (const uri of Object.values(delivered.connections ?? {})) {
    add(uri);
    let conn;
    try {
      conn = parseConnectionUri(uri);
    } catch {
      continue; // not a URI: the whole value is masked above
    }
    add(conn.password);
    add(conn.login);
    for (const [field, value] of Object.entries(conn.extra ?? {})) {
      // as in replies (redactConnectionExtra): a listed field shows a scalar, never an object
      if (!isNonSecretExtraField(field) || (value !== null && typeof value === 'object'))
        add(value);
    }
  }
  return [...out];
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** Unpadded base64 of `bytes` in the given alphabet. */
function base64(bytes: Uint8Array, alphabet: string): string {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out +=
      alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + alphabet[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]!;
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]!;
  }
  return out;
}

/**
 * The part of base64(x + value + y) that depends on `value` alone, for x of 0, 1 or 2 bytes: a
 * value base64-encoded inside a longer payload (`user:password` in a Basic header) still shows.
 */
function base64Cores(bytes: Uint8Array, alphabet: string): string[] {
  const out: string[] = [];
  for (const k of [0, 1, 2]) {
    const padded = new Uint8Array(k + bytes.length);
    padded.set(bytes, k);
    const full = base64(padded, alphabet);
    const start = k === 0 ? 0 : k === 1 ? 2 : 3;
    // a trailing partial group depends on what follows: keep whole groups only
    const end = Math.floor((k + bytes.length) / 3) * 4;
    const core = full.slice(start, end);
    if (core.length >= MIN_MASKED_LENGTH) out.push(core);
  }
  // the value encoded on its own, to its end (what `echo -n $X | base64` prints, padding aside)
  out.push(base64(bytes, alphabet));
  return out;
}

const HEX = '0123456789abcdef';

/** The value and its common encodings. */
export function maskVariants(value: string): string[] {
  const bytes = new TextEncoder().encode(value);
  let hex = '';
  for (const b of bytes) hex += HEX[b >> 4]! + HEX[b & 15]!;
  const out = new Set<string>([
    value,
    JSON.stringify(value).slice(1, -1),
    encodeURIComponent(value),
    encodeURIComponent(value).replace(/%20/g, '+'),
    ...base64Cores(bytes, B64),
    ...base64Cores(bytes, B64URL),
    hex,
    hex.toUpperCase(),
  ]);
  return [...out].filter((v) => v.length >= MIN_MASKED_LENGTH);
}

const Q = 4;
const TABLE_BITS = 1 << 18;
const TABLE_MASK = TABLE_BITS - 1;
const P = 1031;
const P3 = Math.imul(Math.imul(P, P), P);

function qgramHash(s: string, i: number): number {
  let h = 0;
  for (let k = 0; k < Q; k++) h = (Math.imul(h, P) + s.charCodeAt(i + k)) | 0;
  return h;
}

/** Replaces delivered values (and their encodings) with `***`, counting what it replaced. */
export class SecretMasker {
  readonly #table = new Uint8Array(TABLE_BITS);
  /** hash bucket → patterns starting with such a 4-gram, longest first */
  readonly #buckets = new Map<number, string[]>();
  readonly #patterns: number;
  /** occurrences replaced so far (merged overlapping ones count once) */
  masked = 0;

  private constructor(patterns: readonly string[]) {
    this.#patterns = patterns.length;
    for (const p of [...patterns].sort((a, b) => b.length - a.length)) {
      const h = qgramHash(p, 0) & TABLE_MASK;
      this.#table[h] = 1;
      const bucket = this.#buckets.get(h);
      if (bucket) bucket.push(p);
      else this.#buckets.set(h, [p]);
    }
  }

  /** Built once per attempt from what it was delivered. */
  static forDelivery(delivered: DeliveredSecrets): SecretMasker {
    return SecretMasker.forValues(secretValues(delivered));
  }

  static forValues(values: Iterable<string>): SecretMasker {
    const patterns = new Set<string>();
    for (const v of values)
      if (v.length >= MIN_MASKED_LENGTH) for (const x of maskVariants(v)) patterns.add(x);
    return new SecretMasker([...patterns]);
  }

  /** How many strings it looks for (values × encodings). */
  get patterns(): number {
    return this.#patterns;
  }

  /** The text with every occurrence replaced by `***` (the same string when there is none). */
  mask(text: string): string {
    if (this.#patterns === 0 || text.length < MIN_MASKED_LENGTH) return text;
    const table = this.#table;
    let out = '';
    let copied = 0; // text before this index is in `out` (or masked)
    let maskFrom = -1;
    let maskTo = -1; // the open masked region [maskFrom, maskTo)
    const last = text.length - Q;
    let h = qgramHash(text, 0);
    for (let i = 0; i <= last; i++) {
      if (i > 0) {
        // roll: drop text[i-1], add text[i+Q-1]
        h =
          (Math.imul(h - Math.imul(text.charCodeAt(i - 1), P3), P) + text.charCodeAt(i + Q - 1)) |
          0;
      }
      if (table[h & TABLE_MASK] === 0) continue;
      const bucket = this.#buckets.get(h & TABLE_MASK);
      if (bucket === undefined) continue;
      for (const p of bucket) {
        if (p.length <= text.length - i && text.startsWith(p, i)) {
          const end = i + p.length;
          if (i <= maskTo) {
            if (end > maskTo) maskTo = end; // overlaps or touches the open region: extend it
          } else {
            if (maskTo >= 0) {
              out += text.slice(copied, maskFrom) + MASK;
              copied = maskTo;
              this.masked++;
            }
            maskFrom = i;
            maskTo = end;
          }
          break; // the longest pattern at i (buckets are longest first)
        }
      }
    }
    if (maskTo < 0) return text;
    out += text.slice(copied, maskFrom) + MASK + text.slice(maskTo);
    this.masked++;
    return out;
  }
}
