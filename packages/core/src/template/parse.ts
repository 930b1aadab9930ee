/**
 * The template language of `command:` and `env:` values (docs/authoring.md, "Templates"): a
 * small, pure subset of Jinja's syntax. Text outside `{{ … }}` is literal; inside is one
 * expression: a literal or a dotted name (`params.batch`, `dag_run.conf["key"]`), then filters
 * (`| ds_add(7)`, `| ds_format('%Y-%m-%d', '%d/%m/%Y')`, `| default('x')`). Airflow's macro
 * calls `macros.ds_add(ds, 7)` and `macros.ds_format(ds, in, out)` are read as the same filters.
 * Nothing else: no statements, no arithmetic, no method calls, so rendering runs no code.
 *
 * Escapes, for a literal `{{` in a command: `{{ '{{' }}` (an expression whose value is the text),
 * or a whole stretch inside `{% raw %}…{% endraw %}`. Only `{{`, and `{%` in a `{% word … %}` closed
 * on its line, open anything; `{#` is plain text here (unlike Jinja, so bash's `${#array[@]}`
 * and printf's `'{%s}'` need no escape).
 */

export type TemplateErrorCode =
  | 'LF_TEMPLATE_SYNTAX'
  | 'LF_TEMPLATE_UNSUPPORTED'
  | 'LF_TEMPLATE_UNDEFINED'
  | 'LF_TEMPLATE_NOT_DECLARED'
  | 'LF_TEMPLATE_FILTER';

export interface TemplateProblem {
  code: TemplateErrorCode;
  message: string;
  hint: string;
  /** offset in the template text (0-based) where the problem is */
  offset: number;
}

export type Literal = string | number | boolean | null;

/** A value: a literal, or a name followed by attribute / item accesses. */
export type Operand =
  | { kind: 'literal'; value: Literal; offset: number }
  | { kind: 'path'; root: string; segments: string[]; offset: number; text: string };

export interface FilterCall {
  name: string;
  args: Operand[];
  offset: number;
}

export interface Expression {
  base: Operand;
  filters: FilterCall[];
}

export type TemplatePart =
  | { kind: 'text'; text: string }
  | {
      kind: 'expr';
      expr: Expression;
      /** offset of the opening `{{` */
      offset: number;
      /** the whole `{{ … }}` as written */
      source: string;
    };

export type ParseResult =
  { ok: true; parts: TemplatePart[] } | { ok: false; problem: TemplateProblem };

/** The filters the renderer knows; anything else is refused by name. */
export const TEMPLATE_FILTERS = ['ds_add', 'ds_format', 'default'] as const;
export type FilterName = (typeof TEMPLATE_FILTERS)[number];

export const ESCAPE_HINT =
  "for a literal {{ write {{ '{{' }}, or wrap the text in {% raw %}…{% endraw %}";

/** True when `text` holds anything the renderer would treat as template syntax. */
export function hasTemplateSyntax(text: string): boolean {
  if (text.includes('{{')) return true;
  for (let i = text.indexOf('{%'); i !== -1; i = text.indexOf('{%', i + 1))
    if (STATEMENT_START.test(lineFrom(text, i))) return true;
  return false;
}

/**
 * `{%` opens a statement only as `{% word … %}` closed on the same line; anything else (a
 * printf format `'{%s}'`) is plain text.
 */
const STATEMENT_START = /^\{%-?\s*[A-Za-z_][^\n]*?%\}/;

function lineFrom(text: string, i: number): string {
  const end = text.indexOf('\n', i);
  return text.slice(i, end === -1 ? undefined : end);
}

/** A template problem on its way out of the recursion; never leaves this module. */
class Fail extends Error {
  constructor(readonly problem: TemplateProblem) {
    super(problem.message);
  }
}

function fail(
  code: TemplateErrorCode,
  offset: number,
  message: string,
  hint: string = ESCAPE_HINT,
): never {
  throw new Fail({ code, offset, message, hint });
}

const STATEMENT = /\{%(-?)\s*([A-Za-z_][A-Za-z0-9_]*)\s*(-?)%\}/y;

export function parseTemplate(text: string): ParseResult {
  try {
    return { ok: true, parts: parseParts(text) };
  } catch (e) {
    if (e instanceof Fail) return { ok: false, problem: e.problem };
    throw e;
  }
}

function parseParts(text: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let buf = '';
  let i = 0;
  const flush = (): void => {
    if (buf !== '') parts.push({ kind: 'text', text: buf });
    buf = '';
  };
  while (i < text.length) {
    const open = nextOpen(text, i);
    if (open === -1) {
      buf += text.slice(i);
      break;
    }
    buf += text.slice(i, open);
    if (text.startsWith('{{', open)) {
      const close = findClose(text, open + 2);
      if (close === -1)
        fail('LF_TEMPLATE_SYNTAX', open, '"{{" is never closed by "}}"', ESCAPE_HINT);
      const inner = text.slice(open + 2, close);
      if (inner.startsWith('-') || inner.endsWith('-'))
        fail(
          'LF_TEMPLATE_UNSUPPORTED',
          open,
          'whitespace control ({{- … -}}) is not supported',
          'remove the "-" next to the braces',
        );
      flush();
      parts.push({
        kind: 'expr',
        expr: new ExprParser(inner, open + 2).parse(),
        offset: open,
        source: text.slice(open, close + 2),
      });
      i = close + 2;
      continue;
    }
    // `{%`: only raw … endraw exists
    STATEMENT.lastIndex = open;
    const m = STATEMENT.exec(text);
    const word = m?.[2];
    if (m && word === 'raw') {
      const end = /\{%-?\s*endraw\s*-?%\}/g;
      end.lastIndex = open + m[0].length;
      const e = end.exec(text);
      if (!e)
        fail(
          'LF_TEMPLATE_SYNTAX',
          open,
          '{% raw %} is never closed by {% endraw %}',
          'add {% endraw %} after the literal text',
        );
      buf += text.slice(open + m[0].length, e.index);
      i = e.index + e[0].length;
      continue;
    }
    const name = word ?? /^\{%-?\s*([A-Za-z_][A-Za-z0-9_]*)/.exec(text.slice(open))?.[1] ?? '';
    fail(
      'LF_TEMPLATE_UNSUPPORTED',
      open,
      `the statement {% ${name} %} is not supported: templates hold {{ expressions }} only, and {% raw %}`,
      name === 'endraw'
        ? 'add {% raw %} before the literal text, or remove the stray {% endraw %}'
        : `compute the value in the task itself (the run context is in its environment); ${ESCAPE_HINT}`,
    );
  }
  flush();
  return parts;
}

/** The next `{{`, or `{%` followed by a word (a statement), from `from`; -1 when none. */
function nextOpen(text: string, from: number): number {
  for (let i = text.indexOf('{', from); i !== -1; i = text.indexOf('{', i + 1)) {
    const c = text.charAt(i + 1);
    if (c === '{') return i;
    if (c === '%' && STATEMENT_START.test(lineFrom(text, i))) return i;
  }
  return -1;
}

/** The `}}` closing an expression that starts at `from`, skipping quoted strings. */
function findClose(text: string, from: number): number {
  let quote = '';
  for (let i = from; i < text.length; i++) {
    const c = text.charAt(i);
    if (quote !== '') {
      if (c === '\\') i++;
      else if (c === quote) quote = '';
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '}' && text.charAt(i + 1) === '}') return i;
  }
  return -1;
}

type Token =
  | { t: 'name'; v: string; at: number }
  | { t: 'str'; v: string; at: number }
  | { t: 'num'; v: number; at: number }
  | { t: 'op'; v: string; at: number }
  | { t: 'end'; at: number };

class ExprParser {
  private readonly toks: Token[];
  private k = 0;

  constructor(
    private readonly src: string,
    private readonly base: number,
  ) {
    this.toks = this.lex();
  }

  private lex(): Token[] {
    const out: Token[] = [];
    const s = this.src;
    let i = 0;
    while (i < s.length) {
      const c = s.charAt(i);
      if (/\s/.test(c)) {
        i++;
        continue;
      }
      const at = this.base + i;
      if (/[A-Za-z_]/.test(c)) {
        const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(s.slice(i))![0];
        out.push({ t: 'name', v: m, at });
        i += m.length;
      } else if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(s.charAt(i + 1)))) {
        const m = /^-?[0-9]+(\.[0-9]+)?/.exec(s.slice(i))![0];
        out.push({ t: 'num', v: Number(m), at });
        i += m.length;
      } else if (c === "'" || c === '"') {
        let j = i + 1;
        let v = '';
        for (; j < s.length && s.charAt(j) !== c; j++) {
          if (s.charAt(j) === '\\' && j + 1 < s.length) {
            j++;
            const e = s.charAt(j);
            v += e === 'n' ? '\n' : e === 't' ? '\t' : e;
          } else v += s.charAt(j);
        }
        if (j >= s.length) fail('LF_TEMPLATE_SYNTAX', at, 'a quoted string is never closed');
        out.push({ t: 'str', v, at });
        i = j + 1;
      } else if ('.|()[],'.includes(c)) {
        out.push({ t: 'op', v: c, at });
        i++;
      } else {
        const what = '+-*/%<>=!~'.includes(c)
          ? `the operator "${c}" is not supported (no arithmetic or comparison in templates)`
          : `"${c}" is not valid here`;
        fail(
          c === '.' ? 'LF_TEMPLATE_SYNTAX' : 'LF_TEMPLATE_UNSUPPORTED',
          at,
          what,
          `templates hold a name or a literal followed by filters (ds_add, ds_format, default); ${ESCAPE_HINT}`,
        );
      }
    }
    out.push({ t: 'end', at: this.base + s.length });
    return out;
  }

  private peek(): Token {
    return this.toks[this.k]!;
  }
  private next(): Token {
    return this.toks[this.k++]!;
  }
  private isOp(v: string): boolean {
    const t = this.peek();
    return t.t === 'op' && t.v === v;
  }
  private expectOp(v: string, what: string): void {
    if (!this.isOp(v)) fail('LF_TEMPLATE_SYNTAX', this.peek().at, `expected "${v}" ${what}`);
    this.k++;
  }

  parse(): Expression {
    if (this.peek().t === 'end')
      fail('LF_TEMPLATE_SYNTAX', this.peek().at, 'the expression between {{ and }} is empty');
    const filters: FilterCall[] = [];
    const base = this.operand(filters, true);
    while (this.isOp('|')) {
      this.k++;
      const nameTok = this.next();
      if (nameTok.t !== 'name')
        fail('LF_TEMPLATE_SYNTAX', nameTok.at, 'expected a filter name after "|"');
      filters.push({
        name: this.filterName(nameTok.v, nameTok.at),
        args: this.args(),
        offset: nameTok.at,
      });
    }
    const t = this.peek();
    if (t.t !== 'end') {
      fail(
        t.t === 'op' && t.v === '(' ? 'LF_TEMPLATE_UNSUPPORTED' : 'LF_TEMPLATE_SYNTAX',
        t.at,
        t.t === 'op' && t.v === '('
          ? 'calling a function or method is not supported in templates'
          : `unexpected ${describeTok(t)} in the expression`,
        `templates hold a name or a literal followed by filters (ds_add, ds_format, default); ${ESCAPE_HINT}`,
      );
    }
    return { base, filters };
  }

  private filterName(name: string, at: number): string {
    if ((TEMPLATE_FILTERS as readonly string[]).includes(name)) return name;
    fail(
      'LF_TEMPLATE_UNSUPPORTED',
      at,
      `the filter "${name}" is not supported`,
      `the filters are ${TEMPLATE_FILTERS.join(', ')}; compute anything else in the task itself`,
    );
  }

  private args(): Operand[] {
    const args: Operand[] = [];
    if (!this.isOp('(')) return args;
    this.k++;
    if (this.isOp(')')) {
      this.k++;
      return args;
    }
    for (;;) {
      args.push(this.operand(null, false));
      if (this.isOp(',')) {
        this.k++;
        continue;
      }
      this.expectOp(')', 'to close the argument list');
      return args;
    }
  }

  /**
   * A literal or a dotted path. `macros.ds_add(x, …)` (Airflow's macro call) is accepted at the
   * start of an expression and turned into `x | ds_add(…)`.
   */
  private operand(filters: FilterCall[] | null, top: boolean): Operand {
    const t = this.next();
    if (t.t === 'str' || t.t === 'num') return { kind: 'literal', value: t.v, offset: t.at };
    if (t.t !== 'name')
      fail('LF_TEMPLATE_SYNTAX', t.at, `expected a name or a literal, not ${describeTok(t)}`);
    if (t.v === 'true' || t.v === 'True') return { kind: 'literal', value: true, offset: t.at };
    if (t.v === 'false' || t.v === 'False') return { kind: 'literal', value: false, offset: t.at };
    if (t.v === 'none' || t.v === 'None') return { kind: 'literal', value: null, offset: t.at };
    if (t.v === 'macros' && top && filters !== null) {
      this.expectOp('.', 'after macros');
      const fn = this.next();
      if (fn.t !== 'name')
        fail('LF_TEMPLATE_SYNTAX', fn.at, 'expected a macro name after "macros."');
      if (fn.v !== 'ds_add' && fn.v !== 'ds_format')
        fail(
          'LF_TEMPLATE_UNSUPPORTED',
          fn.at,
          `the macro macros.${fn.v} is not supported`,
          'the macros are macros.ds_add(ds, days) and macros.ds_format(ds, input_format, output_format)',
        );
      if (!this.isOp('('))
        fail(
          'LF_TEMPLATE_SYNTAX',
          this.peek().at,
          `macros.${fn.v} must be called: macros.${fn.v}(ds, …)`,
        );
      const args = this.args();
      const first = args.shift();
      if (first === undefined)
        fail('LF_TEMPLATE_SYNTAX', fn.at, `macros.${fn.v} needs the date as its first argument`);
      filters.push({ name: fn.v, args, offset: fn.at });
      return first;
    }
    const segments: string[] = [];
    let end = t.at + t.v.length;
    for (;;) {
      if (this.isOp('.')) {
        this.k++;
        const seg = this.next();
        if (seg.t !== 'name' && seg.t !== 'num')
          fail('LF_TEMPLATE_SYNTAX', seg.at, `expected an attribute name after "."`);
        segments.push(String(seg.v));
        end = seg.at + String(seg.v).length;
      } else if (this.isOp('[')) {
        this.k++;
        const key = this.next();
        if (key.t !== 'str' && key.t !== 'num')
          fail(
            'LF_TEMPLATE_UNSUPPORTED',
            key.at,
            'only a quoted key or a number may stand inside [ ]',
            'write dag_run.conf["key"] or items[0]',
          );
        segments.push(String(key.v));
        this.expectOp(']', 'to close the subscript');
        end = this.toks[this.k - 1]!.at + 1;
      } else break;
    }
    return {
      kind: 'path',
      root: t.v,
      segments,
      offset: t.at,
      text: this.src.slice(t.at - this.base, end - this.base),
    };
  }
}

function describeTok(t: Token): string {
  switch (t.t) {
    case 'end':
      return 'the end of the expression';
    case 'name':
      return `the name "${t.v}"`;
    case 'str':
      return 'a string';
    case 'num':
      return `the number ${t.v}`;
    default:
      return `"${t.v}"`;
  }
}
