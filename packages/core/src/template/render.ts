import {
  CONNECTION_ATTRIBUTES,
  TEMPLATE_NAMES,
  UNSUPPORTED_TEMPLATE_NAMES,
  type TemplateScope,
} from './context.js';
import { pyStrftime, pyStrptime, unsupportedDirective } from './strftime.js';
import {
  ESCAPE_HINT,
  parseTemplate,
  type Expression,
  type FilterCall,
  type Literal,
  type Operand,
  type TemplatePart,
  type TemplateProblem,
} from './parse.js';

export type RenderResult = { ok: true; text: string } | { ok: false; problem: TemplateProblem };

/** A template problem on its way out of the recursion; never leaves this module. */
class Fail extends Error {
  constructor(readonly problem: TemplateProblem) {
    super(problem.message);
  }
}

const UNDEFINED = Symbol('undefined');
/** a value, or UNDEFINED (a name the run does not have) */
type Value = unknown;

/** Renders `text` against `scope`. Never throws for a bad template: the problem is returned. */
export function renderTemplate(text: string, scope: TemplateScope): RenderResult {
  const parsed = parseTemplate(text);
  if (!parsed.ok) return parsed;
  try {
    return { ok: true, text: renderParts(parsed.parts, scope) };
  } catch (e) {
    if (e instanceof Fail) return { ok: false, problem: e.problem };
    throw e;
  }
}

function renderParts(parts: TemplatePart[], scope: TemplateScope): string {
  let out = '';
  for (const p of parts) out += p.kind === 'text' ? p.text : toText(evaluate(p.expr, scope));
  return out;
}

/** Jinja's rendering of a value (Python's str()), except that lists and mappings render as JSON. */
export function toText(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return String(v);
  return JSON.stringify(v);
}

function evaluate(expr: Expression, scope: TemplateScope): unknown {
  // An undefined base is an error unless the first filter is `default`, which replaces it.
  let v: Value = operand(expr.base, scope, expr.filters[0]?.name === 'default');
  for (const f of expr.filters) v = applyFilter(f, v, scope);
  if (v === UNDEFINED) throw undefinedName(expr.base as Extract<Operand, { kind: 'path' }>);
  return v;
}

function undefinedName(b: Extract<Operand, { kind: 'path' }>): Fail {
  return new Fail({
    code: 'LF_TEMPLATE_UNDEFINED',
    offset: b.offset,
    message: `${b.text} is undefined for this run`,
    hint: `give it a value, or a fallback: {{ ${b.text} | default('…') }}`,
  });
}

function literalOrPath(o: Operand, scope: TemplateScope): Value {
  return o.kind === 'literal' ? o.value : operand(o, scope, false);
}

function operand(o: Operand, scope: TemplateScope, soft: boolean): Value {
  if (o.kind === 'literal') return o.value;
  if (o.root === 'var') return variable(o, scope);
  if (o.root === 'conn') return connection(o, scope, soft);
  let v: unknown = Object.hasOwn(scope.values, o.root) ? scope.values[o.root] : UNDEFINED;
  if (v === UNDEFINED) {
    if (soft) return UNDEFINED;
    throw undefinedName(o);
  }
  for (const seg of o.segments) {
    const next = member(v, seg);
    if (next === UNDEFINED) {
      if (soft) return UNDEFINED;
      throw undefinedName(o);
    }
    v = next;
  }
  return v;
}

function member(v: unknown, seg: string): Value {
  if (Array.isArray(v)) {
    if (!/^-?[0-9]+$/.test(seg)) return UNDEFINED;
    const i = Number(seg);
    const at = i < 0 ? v.length + i : i;
    return at >= 0 && at < v.length ? (v[at] as unknown) : UNDEFINED;
  }
  if (v !== null && typeof v === 'object' && Object.hasOwn(v, seg))
    return (v as Record<string, unknown>)[seg];
  return UNDEFINED;
}

function variable(o: Extract<Operand, { kind: 'path' }>, scope: TemplateScope): Value {
  const [kind, key, ...rest] = o.segments;
  if ((kind !== 'value' && kind !== 'json') || key === undefined)
    throw new Fail({
      code: 'LF_TEMPLATE_UNSUPPORTED',
      offset: o.offset,
      message: `${o.text}: variables are read as var.value.<key> or var.json.<key>`,
      hint: 'write {{ var.value.my_key }} (and declare my_key under variables:)',
    });
  if (!Object.hasOwn(scope.variables, key))
    throw new Fail({
      code: 'LF_TEMPLATE_NOT_DECLARED',
      offset: o.offset,
      message: `variable "${key}" was not delivered to this task (not declared, not granted, or refused)`,
      hint: `declare it: variables: [${key}] on the task or the DAG, and grant it to this DAG`,
    });
  const raw = scope.variables[key]!;
  if (kind === 'value') {
    if (rest.length > 0) return UNDEFINED;
    return raw;
  }
  let v: unknown;
  try {
    v = JSON.parse(raw) as unknown;
  } catch {
    throw new Fail({
      code: 'LF_TEMPLATE_FILTER',
      offset: o.offset,
      message: `variable "${key}" is not valid JSON`,
      hint: `read it as text: {{ var.value.${key} }}`,
    });
  }
  for (const seg of rest) {
    const next = member(v, seg);
    if (next === UNDEFINED) throw undefinedName(o);
    v = next;
  }
  return v;
}

function connection(
  o: Extract<Operand, { kind: 'path' }>,
  scope: TemplateScope,
  soft: boolean,
): Value {
  const [id, attr, ...rest] = o.segments;
  if (id === undefined || attr === undefined) throw unsupportedConnRead(o);
  if (!Object.hasOwn(scope.connections, id))
    throw new Fail({
      code: 'LF_TEMPLATE_NOT_DECLARED',
      offset: o.offset,
      message: `connection "${id}" was not delivered to this task (not declared, not granted, or refused)`,
      hint: `declare it: connections: [${id}] on the task or the DAG, and grant it to this DAG`,
    });
  if (!(CONNECTION_ATTRIBUTES as readonly string[]).includes(attr)) throw unsupportedConnRead(o);
  let v: unknown = (scope.connections[id] as unknown as Record<string, unknown>)[attr];
  for (const seg of rest) {
    const next = member(v, seg);
    if (next === UNDEFINED) {
      if (soft) return UNDEFINED;
      throw undefinedName(o);
    }
    v = next;
  }
  return v;
}

function unsupportedConnRead(o: Extract<Operand, { kind: 'path' }>): Fail {
  return new Fail({
    code: 'LF_TEMPLATE_UNSUPPORTED',
    offset: o.offset,
    message: `${o.text}: a connection is read as conn.<id>.<attribute>, the attribute one of ${CONNECTION_ATTRIBUTES.join(', ')}`,
    hint: 'write {{ conn.my_db.host }}; get_uri() and other methods cannot be called from a template',
  });
}

function filterError(f: FilterCall, message: string, hint: string): Fail {
  return new Fail({ code: 'LF_TEMPLATE_FILTER', offset: f.offset, message, hint });
}

function applyFilter(f: FilterCall, v: Value, scope: TemplateScope): Value {
  const args = f.args.map((a) => literalOrPath(a, scope));
  switch (f.name) {
    case 'default': {
      if (args.length < 1 || args.length > 2)
        throw filterError(
          f,
          'default takes a fallback value (and optionally true)',
          "write | default('x')",
        );
      const fallback = args[0];
      const orFalsy = args[1] === true;
      if (v === UNDEFINED || (orFalsy && !truthy(v))) return fallback;
      return v;
    }
    case 'ds_add': {
      if (args.length !== 1 || typeof args[0] !== 'number' || !Number.isInteger(args[0]))
        throw filterError(f, 'ds_add takes one whole number of days', 'write {{ ds | ds_add(7) }}');
      return dsAdd(f, v, args[0]);
    }
    case 'ds_format': {
      if (args.length !== 2 || typeof args[0] !== 'string' || typeof args[1] !== 'string')
        throw filterError(
          f,
          'ds_format takes the input format and the output format',
          "write {{ ds | ds_format('%Y-%m-%d', '%d/%m/%Y') }}",
        );
      const d = pyStrptime(String(v), args[0]);
      if (typeof d === 'string') throw filterError(f, `ds_format: ${d}`, 'check the input format');
      const out = pyStrftime(d, args[1]);
      if (out === null)
        throw filterError(
          f,
          `ds_format: the output format ${JSON.stringify(args[1])} holds a directive that is not supported`,
          'see docs/authoring.md for the directives',
        );
      return out;
    }
    default:
      throw filterError(f, `the filter "${f.name}" is not supported`, ESCAPE_HINT);
  }
}

function truthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

function dsAdd(f: FilterCall, v: unknown, days: number): string {
  const text = String(v);
  if (days === 0) return text;
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!m)
    throw filterError(
      f,
      'ds_add needs a date written YYYY-MM-DD',
      'apply it to ds: {{ ds | ds_add(7) }}',
    );
  const t = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  if (new Date(t).toISOString().slice(0, 10) !== text)
    throw filterError(
      f,
      'ds_add: the value is not a calendar date',
      'apply it to ds: {{ ds | ds_add(7) }}',
    );
  const d = new Date(t + days * 86_400_000);
  return d.toISOString().slice(0, 10);
}

// ---- static checks (compile time) -------------------------------------------------------------

/** What the compiler knows about the task whose value is checked. */
export interface StaticScope {
  /** the DAG's params (their keys may be read as params.<key>) */
  params: Record<string, unknown>;
  /** the task's declared variables (its own list, else the DAG's) */
  variables: readonly string[];
  connections: readonly string[];
}

/**
 * The problems a template has whatever the run: syntax, unsupported constructs, names that
 * exist in no run, undeclared secrets, a params key the DAG does not define (unless a default
 * follows), a date format with a directive the renderer lacks. Runtime values (dag_run.conf.*,
 * a date on a run without one) are checked when the agent renders.
 */
export function checkTemplate(text: string, scope: StaticScope): TemplateProblem[] {
  const parsed = parseTemplate(text);
  if (!parsed.ok) return [parsed.problem];
  const out: TemplateProblem[] = [];
  for (const p of parsed.parts) {
    if (p.kind !== 'expr') continue;
    const hasDefault = p.expr.filters.some((f) => f.name === 'default');
    const operands = [p.expr.base, ...p.expr.filters.flatMap((f) => f.args)];
    for (const o of operands) {
      if (o.kind !== 'path') continue;
      const problem = checkPath(o, scope, hasDefault && o === p.expr.base);
      if (problem) out.push(problem);
    }
    for (const f of p.expr.filters) {
      if (f.name !== 'ds_format') continue;
      for (const a of f.args) {
        if (a.kind === 'literal' && typeof a.value === 'string') {
          const bad = unsupportedDirective(a.value);
          if (bad !== null)
            out.push({
              code: 'LF_TEMPLATE_FILTER',
              offset: a.offset,
              message: `the date directive ${bad} is not supported by ds_format`,
              hint: 'the directives are %Y %y %m %d %H %I %M %S %f %p %j %a %A %b %B %z %Z %%',
            });
        }
      }
    }
  }
  return out;
}

function checkPath(
  o: Extract<Operand, { kind: 'path' }>,
  scope: StaticScope,
  defaulted: boolean,
): TemplateProblem | null {
  const root = o.root;
  if (!(TEMPLATE_NAMES as readonly string[]).includes(root)) {
    const instead = UNSUPPORTED_TEMPLATE_NAMES[root];
    return {
      code: instead ? 'LF_TEMPLATE_UNSUPPORTED' : 'LF_TEMPLATE_UNDEFINED',
      offset: o.offset,
      message: instead
        ? `${root} is not in Leoflow's template context: ${instead}`
        : `${root} is not a name templates know`,
      hint: instead ? instead : `the names are ${TEMPLATE_NAMES.join(', ')}; ${ESCAPE_HINT}`,
    };
  }
  const [first] = o.segments;
  if (
    root === 'params' &&
    first !== undefined &&
    !defaulted &&
    !Object.hasOwn(scope.params, first)
  ) {
    return {
      code: 'LF_TEMPLATE_UNDEFINED',
      offset: o.offset,
      message: `params.${first} is not defined: the DAG's params are ${Object.keys(scope.params).join(', ') || '(none)'}`,
      hint: `add it under params: (a run's conf may override it), or give a fallback: {{ params.${first} | default('…') }}`,
    };
  }
  if (root === 'var') {
    const [kind, key] = o.segments;
    if ((kind !== 'value' && kind !== 'json') || key === undefined)
      return {
        code: 'LF_TEMPLATE_UNSUPPORTED',
        offset: o.offset,
        message: `${o.text}: variables are read as var.value.<key> or var.json.<key>`,
        hint: 'write {{ var.value.my_key }} (and declare my_key under variables:)',
      };
    if (!scope.variables.includes(key))
      return {
        code: 'LF_TEMPLATE_NOT_DECLARED',
        offset: o.offset,
        message: `variable "${key}" is read by a template but not declared for this task`,
        hint: `add variables: [${key}] to the task (or the DAG); templates read only declared, granted secrets`,
      };
  }
  if (root === 'conn') {
    const [id, attr] = o.segments;
    if (
      id === undefined ||
      attr === undefined ||
      !(CONNECTION_ATTRIBUTES as readonly string[]).includes(attr)
    )
      return {
        code: 'LF_TEMPLATE_UNSUPPORTED',
        offset: o.offset,
        message: `${o.text}: a connection is read as conn.<id>.<attribute>, the attribute one of ${CONNECTION_ATTRIBUTES.join(', ')}`,
        hint: 'write {{ conn.my_db.host }}; get_uri() and other methods cannot be called from a template',
      };
    if (!scope.connections.includes(id))
      return {
        code: 'LF_TEMPLATE_NOT_DECLARED',
        offset: o.offset,
        message: `connection "${id}" is read by a template but not declared for this task`,
        hint: `add connections: [${id}] to the task (or the DAG); templates read only declared, granted secrets`,
      };
  }
  return null;
}

export type { Literal };
