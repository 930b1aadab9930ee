/**
 * A small WHATWG `Headers` for the bundled agent, which esbuild injects in place of the global
 * (see the `bundle` script). In Node 20 the global `Headers` is a lazy getter that loads all of
 * undici (fetch, web streams, dispatchers): ≈ 20 ms of CPU on the first RPC of every agent
 * process, which connect-es triggers by building its request headers with `new Headers()`.
 * The agent never uses fetch, so this class covers what connect-es and the agent call:
 * construction from a HeadersInit or another Headers, append/set/get/has/delete, forEach,
 * iteration (sorted by name, set-cookie values kept apart) and getSetCookie.
 */

type Init = Iterable<readonly [string, string]> | Record<string, string> | undefined | null;

// RFC 9110 token characters, as the Fetch standard requires of header names
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// leading/trailing HTTP whitespace is stripped from values; NUL, CR and LF are refused
const EDGE_WS = /^[\t\n\r ]+|[\t\n\r ]+$/g;
const BAD_VALUE = /[\0\r\n]/;

function name(n: string): string {
  const s = String(n);
  if (!TOKEN.test(s)) throw new TypeError(`Headers: invalid header name "${s}"`);
  return s.toLowerCase();
}

function value(v: string): string {
  const s = String(v).replace(EDGE_WS, '');
  if (BAD_VALUE.test(s)) throw new TypeError('Headers: invalid header value');
  return s;
}

export class LiteHeaders {
  /** lower-case name -> values in insertion order (several only for set-cookie or append) */
  readonly #map = new Map<string, string[]>();

  constructor(init?: Init) {
    if (init === undefined || init === null) return;
    if (typeof init !== 'object') throw new TypeError('Headers: init must be an object');
    const iter = (init as { [Symbol.iterator]?: unknown })[Symbol.iterator];
    if (typeof iter === 'function') {
      for (const pair of init as Iterable<readonly [string, string]>) {
        const p = [...(pair as Iterable<string>)];
        if (p.length !== 2) throw new TypeError('Headers: each init pair must have two items');
        this.append(p[0]!, p[1]!);
      }
    } else {
      for (const k of Object.keys(init)) this.append(k, (init as Record<string, string>)[k]!);
    }
  }

  append(n: string, v: string): void {
    const k = name(n);
    const val = value(v);
    const cur = this.#map.get(k);
    if (cur) cur.push(val);
    else this.#map.set(k, [val]);
  }

  set(n: string, v: string): void {
    this.#map.set(name(n), [value(v)]);
  }

  get(n: string): string | null {
    const cur = this.#map.get(name(n));
    return cur === undefined ? null : cur.join(', ');
  }

  has(n: string): boolean {
    return this.#map.has(name(n));
  }

  delete(n: string): void {
    this.#map.delete(name(n));
  }

  getSetCookie(): string[] {
    return [...(this.#map.get('set-cookie') ?? [])];
  }

  forEach(cb: (value: string, key: string, parent: LiteHeaders) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) cb.call(thisArg, v, k, this);
  }

  *entries(): IterableIterator<[string, string]> {
    const names = [...this.#map.keys()].sort();
    for (const k of names) {
      const vals = this.#map.get(k);
      if (vals === undefined) continue; // deleted while iterating
      if (k === 'set-cookie') for (const v of vals) yield [k, v];
      else yield [k, vals.join(', ')];
    }
  }

  *keys(): IterableIterator<string> {
    for (const [k] of this.entries()) yield k;
  }

  *values(): IterableIterator<string> {
    for (const [, v] of this.entries()) yield v;
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  get [Symbol.toStringTag](): string {
    return 'Headers';
  }
}
