import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { validateDagSpec, type DagSpec } from '@leoflow/core';
import { dagSchema, DAG_SCHEMA_ID } from '@leoflow/protocol';
import { FIXTURES, REPO_ROOT, compileFolder, expectOk } from './helpers.js';

const schemaFile = join(REPO_ROOT, 'packages/protocol/schema/dag.schema.json');
const schema = JSON.parse(readFileSync(schemaFile, 'utf8')) as Record<string, unknown>;

function dagFolders(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .map((d) => join(root, d))
    .filter((d) => existsSync(join(d, 'leoflow.yaml')));
}

/** Every DAG folder expected to compile: the shipped examples and the good/warn fixtures. */
const COMPILABLE = [
  ...dagFolders(join(REPO_ROOT, 'examples/dags')),
  ...dagFolders(join(FIXTURES, 'good')),
  ...dagFolders(join(FIXTURES, 'warn')),
];

function clone(spec: DagSpec): DagSpec {
  return JSON.parse(JSON.stringify(spec)) as DagSpec;
}

const good = (): DagSpec => clone(expectOk(compileFolder(join(FIXTURES, 'good/full'))).spec);

describe('dag.schema.json', () => {
  it('is the file @leoflow/protocol publishes, with the v1.0 $id', () => {
    expect(dagSchema).toEqual(schema);
    expect(schema.$id).toBe('https://leoflow.dev/schemas/dag.schema.json/v1.0');
    expect(DAG_SCHEMA_ID).toBe(schema.$id);
    expect(schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
  });

  it('compiles under Ajv strict mode (no union types, no unknown keywords)', () => {
    expect(() => new Ajv2020({ strict: true }).compile(schema)).not.toThrow();
  });

  it('closes every object: additionalProperties is false wherever properties are listed', () => {
    const open: string[] = [];
    const walk = (node: unknown, at: string): void => {
      if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${at}/${i}`));
      if (node === null || typeof node !== 'object') return;
      const o = node as Record<string, unknown>;
      if ('properties' in o && o.additionalProperties !== false) open.push(at);
      for (const [k, v] of Object.entries(o)) walk(v, `${at}/${k}`);
    };
    walk(schema, '#');
    expect(open).toEqual([]);
  });

  it('lists every DagSpec field as required, so the schema describes the compiled output exactly', () => {
    const spec = good();
    // task_groups is absent unless the DAG has groups (so DAGs compiled before it keep their hash)
    expect(Object.keys((schema.properties as object) ?? {}).sort()).toEqual(
      [...Object.keys(spec), 'task_groups'].sort(),
    );
    expect((schema.required as string[]).slice().sort()).toEqual(Object.keys(spec).sort());
    const task = (schema.$defs as Record<string, { properties: object; required: string[] }>).task!;
    // The optional task keys: absent rather than filled in, so a DAG compiled before they existed
    // keeps its spec hash.
    const optional = [
      'executor',
      'runner_labels',
      'kubernetes',
      'retry_exponential_backoff',
      'max_retry_delay_seconds',
      'setup',
      'teardown',
      'on_failure_fail_dagrun',
      'branch',
      'short_circuit',
      'group',
      'expand',
      'max_map_length',
      'templated',
    ];
    expect(Object.keys(task.properties).sort()).toEqual(
      [...Object.keys(spec.tasks[0]!), ...optional].sort(),
    );
    expect(task.required.slice().sort()).toEqual(Object.keys(spec.tasks[0]!).sort());
  });

  it(`validates the compiled output of every example and fixture (${COMPILABLE.length} DAGs)`, () => {
    expect(COMPILABLE.length).toBeGreaterThanOrEqual(5);
    const validate = new Ajv2020({ strict: true, allErrors: true }).compile(schema);
    for (const dir of COMPILABLE) {
      const spec = expectOk(compileFolder(dir)).spec;
      const valid = validate(clone(spec));
      expect(validate.errors ?? [], dir).toEqual([]);
      expect(valid, dir).toBe(true);
      expect(validateDagSpec(clone(spec)), dir).toEqual({ ok: true, spec: clone(spec) });
    }
  });
});

describe('validateDagSpec (dag.json pushed through the API)', () => {
  const errorsOf = (mutate: (s: DagSpec & Record<string, unknown>) => void): unknown => {
    const spec = good() as DagSpec & Record<string, unknown>;
    mutate(spec);
    const r = validateDagSpec(spec);
    if (r.ok) throw new Error('expected validation errors');
    return r.errors;
  };

  it('returns the spec unchanged when valid', () => {
    const spec = good();
    const r = validateDagSpec(spec);
    expect(r).toEqual({ ok: true, spec });
  });

  it.each<
    [string, (s: DagSpec & Record<string, unknown>) => void, { code: string; path: string }[]]
  >([
    ['a non-object', () => {}, []],
    ['an unknown key', (s) => (s.image = 'x'), [{ code: 'LF_DAG_SCHEMA', path: 'image' }]],
    [
      'a missing key',
      (s) => delete (s as Partial<DagSpec>).owner,
      [{ code: 'LF_DAG_SCHEMA', path: '' }],
    ],
    [
      'a wrong type',
      (s) => ((s as Record<string, unknown>).catchup = 'yes'),
      [{ code: 'LF_DAG_SCHEMA', path: 'catchup' }],
    ],
    [
      'schedule of a wrong type',
      (s) => ((s as Record<string, unknown>).schedule = 5),
      [{ code: 'LF_DAG_SCHEMA', path: 'schedule' }],
    ],
    [
      'a bad schema_version',
      (s) => ((s as Record<string, unknown>).schema_version = '2.0'),
      [{ code: 'LF_DAG_SCHEMA', path: 'schema_version' }],
    ],
    ['a bad dag_id', (s) => (s.dag_id = 'no spaces'), [{ code: 'LF_DAG_BAD_ID', path: 'dag_id' }]],
    [
      'retries out of range',
      (s) => (s.tasks[0]!.retries = 101),
      [{ code: 'LF_DAG_SCHEMA', path: 'tasks[0].retries' }],
    ],
    [
      'a zero timeout',
      (s) => (s.defaults.execution_timeout_seconds = 0),
      [{ code: 'LF_DAG_SCHEMA', path: 'defaults.execution_timeout_seconds' }],
    ],
    [
      'a duplicate task',
      (s) => (s.tasks[1]!.task_id = 'extract'),
      [
        { code: 'LF_DAG_DUPLICATE_TASK', path: 'tasks[1].task_id' },
        // the renamed task no longer exists under its old name
        { code: 'LF_DAG_UNKNOWN_UPSTREAM', path: 'tasks[2].depends_on[1]' },
      ],
    ],
    [
      'an unknown upstream',
      (s) => (s.tasks[2]!.depends_on = ['extract', 'nope']),
      [{ code: 'LF_DAG_UNKNOWN_UPSTREAM', path: 'tasks[2].depends_on[1]' }],
    ],
    [
      'a cycle',
      (s) => (s.tasks[0]!.depends_on = ['report']),
      [{ code: 'LF_DAG_CYCLE', path: 'tasks[0].depends_on[0]' }],
    ],
    [
      'a schedule alias not in normal form',
      (s) => (s.schedule = '@annually'),
      [{ code: 'LF_DAG_BAD_CRON', path: 'schedule' }],
    ],
    [
      'an invalid cron',
      (s) => (s.schedule = '99 * * * *'),
      [{ code: 'LF_DAG_BAD_CRON', path: 'schedule' }],
    ],
    [
      'an unknown zone',
      (s) => (s.schedule_timezone = 'Mars/Olympus'),
      [{ code: 'LF_DAG_UNKNOWN_TIMEZONE', path: 'schedule_timezone' }],
    ],
    [
      'a non-canonical date',
      (s) => (s.start_date = '2026-01-01'),
      [{ code: 'LF_DAG_BAD_DATE', path: 'start_date' }],
    ],
    [
      'an impossible date',
      (s) => (s.start_date = '2026-02-30T00:00:00.000Z'),
      [{ code: 'LF_DAG_BAD_DATE', path: 'start_date' }],
    ],
    [
      'end before start',
      (s) => (s.end_date = '2020-01-01T00:00:00.000Z'),
      [{ code: 'LF_DAG_BAD_DATE', path: 'end_date' }],
    ],
    [
      'a reserved env key',
      (s) => (s.tasks[1]!.env = { LeoFlow_X: 'y' }),
      [{ code: 'LF_DAG_RESERVED_ENV', path: 'tasks[1].env.LeoFlow_X' }],
    ],
    [
      'a bad env key',
      (s) => (s.tasks[1]!.env = { 'A-B': 'y' }),
      [{ code: 'LF_DAG_BAD_ENV', path: 'tasks[1].env["A-B"]' }],
    ],
    [
      'an exact duplicate declaration',
      (s) => (s.connections = ['a', 'a']),
      [{ code: 'LF_DAG_DUPLICATE_DECLARATION', path: 'connections[1]' }],
    ],
    [
      'a case-only duplicate declaration',
      (s) => (s.tasks[0]!.variables = ['key', 'KEY']),
      [{ code: 'LF_DAG_DUPLICATE_DECLARATION', path: 'tasks[0].variables[1]' }],
    ],
    ['no tasks', (s) => (s.tasks = []), [{ code: 'LF_DAG_SCHEMA', path: 'tasks' }]],
  ])('rejects %s', (name, mutate, expected) => {
    if (name === 'a non-object') {
      const r = validateDagSpec('not a dag');
      expect(r).toMatchObject({ ok: false, errors: [{ code: 'LF_DAG_SCHEMA', path: '' }] });
      return;
    }
    expect(errorsOf(mutate)).toEqual(expected.map((e) => ({ ...e, message: expect.any(String) })));
  });

  it('reports several problems at once', () => {
    const errors = errorsOf((s) => {
      s.tasks[0]!.depends_on = ['ghost'];
      s.tasks[1]!.env = { LEOFLOW_A: 'x' };
    }) as { code: string }[];
    expect(errors.map((e) => e.code).sort()).toEqual([
      'LF_DAG_RESERVED_ENV',
      'LF_DAG_UNKNOWN_UPSTREAM',
    ]);
  });
});
