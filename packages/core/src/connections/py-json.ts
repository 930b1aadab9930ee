/**
 * JSON read and written the way Python's `json` module does it. Airflow export files are
 * written by Python and variable values are re-serialised by Python (`Variable.set(...,
 * serialize_json=True)` → `json.dumps(value, indent=2)`), so reproducing that text exactly needs
 * what `JSON.parse` throws away: number lexemes (`1.0` vs `1`, integers past 2^53), key order
 * (JS hoists integer-like keys) and Python's NaN/Infinity literals. It also gives line numbers
 * for error reports and error messages that never quote the input (V8's do).
 */

export type PyJson =
  | { kind: 'object'; entries: Map<string, PyJsonEntry> }
  | { kind: 'array'; items: PyJson[] }
  | { kind: 'string'; value: string }
  | { kind: 'number'; lexeme: string }
  | { kind: 'true' }
  | { kind: 'false' }
  | { kind: 'null' };

export interface PyJsonEntry {
  value: PyJson;
  /** 1-based line of the key, for error reports. */
  line: number;
}

/** Position and fixed description of a syntax error; never any of the input text. */
export class PyJsonSyntaxError extends Error {
  constructor(
    readonly line: number,
    readonly column: number,
    readonly problem: string,
  ) {
    super(`line ${line} column ${column}: ${problem}`);
    this.name = 'PyJsonSyntaxError';
  }
}

const MAX_DEPTH = 500;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?/y;
const WS = /[ \t\n\r]*/y;

export function parsePyJson(text: string): PyJson {
  const p = new Parser(text.startsWith('\ufeff') ? text.slice(1) : text);
  p.ws();
  if (p.pos >= p.s.length) throw p.error('the document is empty');
  const v = p.value(0);
  p.ws();
  if (p.pos < p.s.length) throw p.error('unexpected data after the JSON value');
  return v;
}

class Parser {
  pos = 0;
  constructor(readonly s: string) {}

  error(problem: string, at = this.pos): PyJsonSyntaxError {
    let line = 1;
    let lineStart = 0;
    for (let i = 0; i < at && i < this.s.length; i++) {
      if (this.s.charCodeAt(i) === 10) {
        line++;
        lineStart = i + 1;
      }
    }
    return new PyJsonSyntaxError(line, at - lineStart + 1, problem);
  }

  lineAt(at: number): number {
    let line = 1;
    for (let i = 0; i < at; i++) if (this.s.charCodeAt(i) === 10) line++;
    return line;
  }

  ws(): void {
    WS.lastIndex = this.pos;
    WS.exec(this.s);
    this.pos = WS.lastIndex;
  }

  value(depth: number): PyJson {
    if (depth > MAX_DEPTH) throw this.error('the JSON nests too deeply');
    const c = this.s[this.pos];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return { kind: 'string', value: this.string() };
    for (const [word, node] of LITERALS) {
      if (this.s.startsWith(word, this.pos)) {
        this.pos += word.length;
        return node;
      }
    }
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.s);
    if (m !== null) {
      this.pos += m[0].length;
      return { kind: 'number', lexeme: m[0] };
    }
    throw this.error(this.pos >= this.s.length ? 'unexpected end of input' : 'expected a value');
  }

  object(depth: number): PyJson {
    this.pos++;
    // A Map keeps Python's dict semantics: a repeated key keeps its first position and its
    // last value.
    const entries = new Map<string, PyJsonEntry>();
    this.ws();
    if (this.s[this.pos] === '}') {
      this.pos++;
      return { kind: 'object', entries };
    }
    for (;;) {
      if (this.s[this.pos] !== '"') throw this.error('expected a property name in double quotes');
      const line = this.lineAt(this.pos);
      const key = this.string();
      this.ws();
      if (this.s[this.pos] !== ':') throw this.error("expected ':' after a property name");
      this.pos++;
      this.ws();
      entries.set(key, { value: this.value(depth + 1), line });
      this.ws();
      const c = this.s[this.pos];
      this.pos++;
      if (c === '}') return { kind: 'object', entries };
      if (c !== ',') throw this.error("expected ',' or '}'", this.pos - 1);
      this.ws();
    }
  }

  array(depth: number): PyJson {
    this.pos++;
    const items: PyJson[] = [];
    this.ws();
    if (this.s[this.pos] === ']') {
      this.pos++;
      return { kind: 'array', items };
    }
    for (;;) {
      items.push(this.value(depth + 1));
      this.ws();
      const c = this.s[this.pos];
      this.pos++;
      if (c === ']') return { kind: 'array', items };
      if (c !== ',') throw this.error("expected ',' or ']'", this.pos - 1);
      this.ws();
    }
  }

  string(): string {
    const start = this.pos;
    this.pos++;
    let out = '';
    for (;;) {
      if (this.pos >= this.s.length) throw this.error('unterminated string', start);
      const code = this.s.charCodeAt(this.pos);
      if (code === 0x22) {
        this.pos++;
        return out;
      }
      if (code < 0x20) throw this.error('invalid control character in a string');
      if (code !== 0x5c) {
        out += this.s[this.pos];
        this.pos++;
        continue;
      }
      const e = this.s[this.pos + 1];
      const simple = e === undefined ? undefined : ESCAPES[e];
      if (simple !== undefined) {
        out += simple;
        this.pos += 2;
      } else if (e === 'u') {
        const hex = this.s.slice(this.pos + 2, this.pos + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw this.error('invalid \\uXXXX escape');
        // Surrogate escapes are appended as code units: a pair joins by itself, a lone one
        // stays lone, as in Python.
        out += String.fromCharCode(parseInt(hex, 16));
        this.pos += 6;
      } else {
        throw this.error('invalid escape in a string');
      }
    }
  }
}

const LITERALS: ReadonlyArray<readonly [string, PyJson]> = [
  ['null', { kind: 'null' }],
  ['true', { kind: 'true' }],
  ['false', { kind: 'false' }],
  // Python's json reads and writes these by default (allow_nan=True).
  ['NaN', { kind: 'number', lexeme: 'NaN' }],
  ['Infinity', { kind: 'number', lexeme: 'Infinity' }],
  ['-Infinity', { kind: 'number', lexeme: '-Infinity' }],
];

const ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

/** Thrown by pyJsonToJs for NaN/Infinity, which a JS value cannot carry through JSON. */
export class NonFiniteNumberError extends Error {}

/** Converts to plain JS values (numbers become doubles; own properties even for "__proto__"). */
export function pyJsonToJs(node: PyJson): unknown {
  switch (node.kind) {
    case 'object':
      return Object.fromEntries(
        Array.from(node.entries, ([k, e]): [string, unknown] => [k, pyJsonToJs(e.value)]),
      );
    case 'array':
      return node.items.map(pyJsonToJs);
    case 'string':
      return node.value;
    case 'number': {
      const n = Number(node.lexeme);
      if (!Number.isFinite(n)) throw new NonFiniteNumberError();
      return n;
    }
    case 'true':
      return true;
    case 'false':
      return false;
    case 'null':
      return null;
  }
}

/** Thrown by jsToPyJson for a value JSON cannot carry; `problem` is fixed text. */
export class NotJsonError extends Error {
  constructor(readonly problem: string) {
    super(problem);
    this.name = 'NotJsonError';
  }
}

/** Printable ASCII without `"` and `\\`: written as is by Python's ensure_ascii encoder. */
const PLAIN_ASCII = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * Python's `json.dumps(value)` (default separators `", "` and `": "`, ensure_ascii) of a JS
 * value, with `JSON.stringify`'s rules for what is left out (undefined members; `null` for an
 * undefined array item) and stricter ones for what JSON cannot carry (NaN, Infinity, BigInt,
 * functions, cycles): those throw NotJsonError instead of turning into null. A number is written
 * as Python writes the value it parses from the same JSON text (an integer, else a float).
 * Written directly, without an intermediate tree: it is on the secret-delivery path.
 */
export function pyJsonDumpsJs(value: unknown, depth = 0): string {
  if (depth > MAX_DEPTH) throw new NotJsonError('nests too deeply (or holds a cycle)');
  switch (typeof value) {
    case 'string':
      return PLAIN_ASCII.test(value) ? `"${value}"` : pyJsonString(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new NotJsonError('contains NaN or Infinity');
      return Number.isSafeInteger(value) ? String(value) : pyNumber(String(value));
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        if (value.length === 0) return '[]';
        const items = (value as unknown[]).map((v) =>
          v === undefined ? 'null' : pyJsonDumpsJs(v, depth + 1),
        );
        return `[${items.join(', ')}]`;
      }
      let out = '';
      for (const [k, v] of Object.entries(value)) {
        if (v === undefined) continue;
        const key = PLAIN_ASCII.test(k) ? `"${k}"` : pyJsonString(k);
        out += `${out === '' ? '' : ', '}${key}: ${pyJsonDumpsJs(v, depth + 1)}`;
      }
      return `{${out}}`;
    }
    default:
      throw new NotJsonError('holds a value JSON cannot carry (a BigInt, function or symbol)');
  }
}

/**
 * Python's `json.dumps(value, indent=indent)` with its defaults (ensure_ascii, allow_nan, no
 * key sorting): with an indent the separators are `,` and `: `, without one `, ` and `: `.
 */
export function pyJsonDumps(node: PyJson, indent: number | null = null): string {
  return dump(node, indent, 0);
}

function dump(node: PyJson, indent: number | null, level: number): string {
  switch (node.kind) {
    case 'object': {
      if (node.entries.size === 0) return '{}';
      const parts = Array.from(
        node.entries,
        ([k, e]) => `${pyJsonString(k)}: ${dump(e.value, indent, level + 1)}`,
      );
      return wrap('{', '}', parts, indent, level);
    }
    case 'array': {
      if (node.items.length === 0) return '[]';
      const parts = node.items.map((v) => dump(v, indent, level + 1));
      return wrap('[', ']', parts, indent, level);
    }
    case 'string':
      return pyJsonString(node.value);
    case 'number':
      return pyNumber(node.lexeme);
    case 'true':
      return 'true';
    case 'false':
      return 'false';
    case 'null':
      return 'null';
  }
}

function wrap(
  open: string,
  close: string,
  parts: string[],
  indent: number | null,
  level: number,
): string {
  if (indent === null) return open + parts.join(', ') + close;
  const inner = '\n' + ' '.repeat(indent * (level + 1));
  return open + inner + parts.join(',' + inner) + '\n' + ' '.repeat(indent * level) + close;
}

/** Python's ensure_ascii string encoding: everything outside printable ASCII is \uXXXX. */
export function pyJsonString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i]!;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (c >= 0x20 && c <= 0x7e) out += ch;
    else out += '\\u' + c.toString(16).padStart(4, '0');
  }
  return out + '"';
}

/**
 * How Python prints a number it parsed from `lexeme`: an integer exactly (arbitrary precision),
 * a float as `repr(float)` — shortest round-trip digits, fixed notation for decimal exponents in
 * [-4, 16), `.0` on integral values, otherwise `d.ddde±XX`.
 */
export function pyNumber(lexeme: string): string {
  if (lexeme === 'NaN' || lexeme === 'Infinity' || lexeme === '-Infinity') return lexeme;
  if (!/[.eE]/.test(lexeme)) return BigInt(lexeme).toString();
  const f = Number(lexeme);
  if (f === Infinity) return 'Infinity';
  if (f === -Infinity) return '-Infinity';
  if (f === 0) return Object.is(f, -0) ? '-0.0' : '0.0';
  const sign = f < 0 ? '-' : '';
  // JS's Number#toString picks the same shortest, closest digits as Python's repr; only the
  // layout differs.
  const { digits, decpt } = shortestDigits(Math.abs(f));
  if (decpt <= -4 || decpt > 16) {
    const mantissa = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const exp = decpt - 1;
    const expAbs = String(Math.abs(exp)).padStart(2, '0');
    return `${sign}${mantissa}e${exp < 0 ? '-' : '+'}${expAbs}`;
  }
  if (decpt <= 0) return `${sign}0.${'0'.repeat(-decpt)}${digits}`;
  if (decpt >= digits.length) return `${sign}${digits}${'0'.repeat(decpt - digits.length)}.0`;
  return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
}

/** value = 0.DIGITS × 10^decpt, DIGITS without leading or trailing zeros. */
function shortestDigits(x: number): { digits: string; decpt: number } {
  const s = String(x);
  const e = s.indexOf('e');
  if (e >= 0) {
    const mantissa = s.slice(0, e).replace('.', '');
    return { digits: mantissa.replace(/0+$/, ''), decpt: Number(s.slice(e + 1)) + 1 };
  }
  const dot = s.indexOf('.');
  const intPart = dot < 0 ? s : s.slice(0, dot);
  const frac = dot < 0 ? '' : s.slice(dot + 1);
  if (intPart !== '0') {
    return { digits: (intPart + frac).replace(/0+$/, ''), decpt: intPart.length };
  }
  const zeros = /^0*/.exec(frac)![0].length;
  return { digits: frac.slice(zeros).replace(/0+$/, ''), decpt: -zeros };
}

/**
 * A JS value as a PyJson tree, for pyJsonDumps: numbers carry the lexeme JS writes, which Python
 * reads as the same value; members left out as by JSON.stringify. Throws NotJsonError as
 * pyJsonDumpsJs does.
 */
export function jsToPyJson(value: unknown, depth = 0): PyJson {
  if (depth > MAX_DEPTH) throw new NotJsonError('nests too deeply (or holds a cycle)');
  switch (typeof value) {
    case 'string':
      return { kind: 'string', value };
    case 'boolean':
      return value ? { kind: 'true' } : { kind: 'false' };
    case 'number':
      if (!Number.isFinite(value)) throw new NotJsonError('contains NaN or Infinity');
      return { kind: 'number', lexeme: String(value) };
    case 'object': {
      if (value === null) return { kind: 'null' };
      if (Array.isArray(value)) {
        return {
          kind: 'array',
          items: (value as unknown[]).map((v) =>
            v === undefined ? { kind: 'null' } : jsToPyJson(v, depth + 1),
          ),
        };
      }
      const entries = new Map<string, PyJsonEntry>();
      for (const [k, v] of Object.entries(value)) {
        if (v !== undefined) entries.set(k, { value: jsToPyJson(v, depth + 1), line: 1 });
      }
      return { kind: 'object', entries };
    }
    default:
      throw new NotJsonError('holds a value JSON cannot carry (a BigInt, function or symbol)');
  }
}

/** Python's default string order (`sorted()` of str): by code point, not by UTF-16 unit. */
export function compareCodePoints(a: string, b: string): number {
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}
