import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { dagSchema } from '@leoflow/protocol';
import { DAG_ERROR_CODES as C, childPath, indexPath } from './diagnostics.js';
import { checkDagSemantics, isReservedEnvName } from './semantic.js';
import type { DagSpec } from './spec.js';
import { checkTemplate } from '../template/render.js';

export interface DagSpecError {
  code: string;
  /** YAML-style path (tasks[2].depends_on[0]); '' for the document */
  path: string;
  message: string;
}

export type DagSpecValidation = { ok: true; spec: DagSpec } | { ok: false; errors: DagSpecError[] };

let validator: ValidateFunction | undefined;

function getValidator(): ValidateFunction {
  // Compiled on first use: most processes that import core never validate a pushed dag.json.
  validator ??= new Ajv2020({ allErrors: true, strict: true }).compile(dagSchema);
  return validator;
}

/**
 * Validates a dag.json received from outside (the API, a file): the published JSON Schema plus
 * the same semantic checks the compiler runs, with the same codes. There are no positions, only
 * paths.
 */
export function validateDagSpec(json: unknown): DagSpecValidation {
  const validate = getValidator();
  if (validate(json)) {
    const spec = json as DagSpec;
    const errors = checkDagSemantics(spec)
      .filter((i) => i.severity === 'error')
      .map(({ code, path, message }) => ({ code, path, message }));
    errors.push(...templateErrors(spec));
    return errors.length === 0 ? { ok: true, spec } : { ok: false, errors };
  }
  const errors: DagSpecError[] = [];
  const seen = new Set<string>();
  const push = (e: DagSpecError): void => {
    const key = `${e.code}\u0000${e.path}`;
    if (seen.has(key)) return;
    seen.add(key);
    errors.push(e);
  };
  const schemaErrors = collapseAnyOf(validate.errors ?? []);
  // Semantic checks rely on the schema's types. When every failure is about a value (a pattern,
  // a range, a duplicate) rather than a shape, they are still safe to run, and their messages
  // are the more specific ones, so they go first and win the de-duplication.
  if (schemaErrors.every((e) => VALUE_KEYWORDS.has(e.keyword))) {
    for (const i of checkDagSemantics(json)) {
      if (i.severity === 'error') push({ code: i.code, path: i.path, message: i.message });
    }
  }
  for (const e of schemaErrors) {
    const mapped = mapAjvError(e);
    if (mapped) push(mapped);
  }
  return { ok: false, errors };
}

const VALUE_KEYWORDS = new Set([
  'pattern',
  'minLength',
  'maxLength',
  'uniqueItems',
  'propertyNames',
  'minimum',
  'maximum',
  'enum',
  'const',
  'minItems',
]);

/**
 * `anyOf: [null, string-with-pattern]` fails with one error per branch plus the anyOf itself.
 * If the value had the type of some branch, only that branch's complaint matters (a pattern, a
 * range); otherwise the errors fold into one "must be null or string".
 */
function collapseAnyOf(errors: ErrorObject[]): ErrorObject[] {
  let out = errors;
  for (const a of errors.filter((e) => e.keyword === 'anyOf')) {
    const prefix = `${a.schemaPath}/`;
    const branch = out.filter(
      (e) => e.schemaPath.startsWith(prefix) && e.instancePath === a.instancePath,
    );
    const valueErrors = branch.filter((e) => e.keyword !== 'type');
    out = out.filter((e) => e !== a && !branch.includes(e));
    if (valueErrors.length > 0) out.push(...valueErrors);
    else {
      const types = branch.map((e) => String((e.params as { type?: unknown }).type));
      out.push({ ...a, keyword: 'type', message: `must be ${types.join(' or ')}` });
    }
  }
  return out;
}

function pointerToPath(pointer: string): string {
  let path = '';
  for (const raw of pointer.split('/').slice(1)) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path = /^\d+$/.test(seg) ? indexPath(path, Number(seg)) : childPath(path, seg);
  }
  return path;
}

const ID_FIELD = /^(dag_id|tasks\[\d+\]\.task_id|(tasks\[\d+\]\.)?(variables|connections)\[\d+\])$/;

function mapAjvError(e: ErrorObject): DagSpecError | undefined {
  const at = pointerToPath(e.instancePath);
  const params = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return {
        code: C.SCHEMA,
        path: at,
        message: `missing required key "${String(params.missingProperty)}"`,
      };
    case 'additionalProperties':
      return {
        code: C.SCHEMA,
        path: childPath(at, String(params.additionalProperty)),
        message: `unknown key "${String(params.additionalProperty)}"`,
      };
    case 'uniqueItems':
      // Report at the later copy, where the compiler reports it too.
      return {
        code: C.DUPLICATE_DECLARATION,
        path: indexPath(at, Math.max(Number(params.i), Number(params.j))),
        message: 'the same value is listed twice',
      };
    case 'propertyNames': {
      const name = String(params.propertyName);
      const reserved = isReservedEnvName(name);
      return {
        code: reserved ? C.RESERVED_ENV : C.BAD_ENV,
        path: childPath(at, name),
        message: reserved
          ? `env key "${name}" is reserved (LEOFLOW_*)`
          : `env key "${name}" is not a valid environment variable name`,
      };
    }
    case 'pattern':
    case 'minLength':
    case 'maxLength':
      // propertyNames failures are reported by their own 'propertyNames' entry above.
      if (params.propertyName !== undefined || e.schemaPath.includes('/propertyNames/'))
        return undefined;
      if (ID_FIELD.test(at))
        return { code: C.BAD_ID, path: at, message: `not a valid id (${e.message ?? ''})` };
      if (at === 'schedule')
        return {
          code: C.BAD_CRON,
          path: at,
          message: 'not a 5-field cron expression or a known preset',
        };
      if (at === 'start_date' || at === 'end_date')
        return {
          code: C.BAD_DATE,
          path: at,
          message: 'not an RFC 3339 UTC timestamp (YYYY-MM-DDTHH:MM:SS.sssZ)',
        };
      return { code: C.SCHEMA, path: at, message: e.message ?? e.keyword };
    default:
      return { code: C.SCHEMA, path: at, message: e.message ?? e.keyword };
  }
}

/**
 * The compiler's template checks for a task marked `templated` (docs/authoring.md, "Templates"):
 * a dag.json from elsewhere gets the same refusals, by path. An unmarked task's `{{` is literal.
 */
function templateErrors(spec: DagSpec): DagSpecError[] {
  const out: DagSpecError[] = [];
  spec.tasks.forEach((t, i) => {
    if (t.templated !== true) return;
    const scope = {
      params: spec.params,
      variables: t.variables.length > 0 ? t.variables : spec.variables,
      connections: t.connections.length > 0 ? t.connections : spec.connections,
    };
    const at = indexPath('tasks', i);
    const check = (text: string, path: string): void => {
      for (const p of checkTemplate(text, scope))
        out.push({ code: p.code, path, message: p.message });
    };
    if (t.type === 'bash') check(t.command, childPath(at, 'command'));
    for (const [k, v] of Object.entries(t.env)) check(v, childPath(childPath(at, 'env'), k));
  });
  return out;
}
