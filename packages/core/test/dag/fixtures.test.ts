import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DAG_ERROR_CODES,
  formatDiagnostic,
  type CompileDiagnostic,
  type DagSpec,
} from '@leoflow/core';
import { FIXTURES, REPO_ROOT, compileFixture, expectErrors, expectOk } from './helpers.js';

type Expected = Pick<CompileDiagnostic, 'code' | 'line' | 'column' | 'path'> & {
  message?: RegExp;
  hint?: RegExp;
};

/**
 * One real leoflow.yaml per failure on disk under fixtures/bad. Each row lists every error the
 * file must produce, in order, with its exact position — nothing more, nothing less.
 */
const BAD: Record<string, Expected[]> = {
  yaml_syntax: [
    {
      code: 'LF_YAML_SYNTAX',
      line: 6,
      column: 3,
      path: 'tasks[0].depends_on',
      message: /Flow sequence/,
    },
    { code: 'LF_YAML_SYNTAX', line: 6, column: 14, path: 'tasks[1].task_id["b command"]' },
    { code: 'LF_YAML_SYNTAX', line: 6, column: 14, path: 'tasks[1].task_id["b command"]' },
  ],
  yaml_multiple_docs: [
    {
      code: 'LF_YAML_SYNTAX',
      line: 4,
      column: 1,
      path: '',
      message: /more than one YAML document/,
    },
  ],
  yaml_unknown_alias: [
    {
      code: 'LF_YAML_SYNTAX',
      line: 4,
      column: 10,
      path: 'tasks[0].env',
      message: /\*shared_env refers to no anchor/,
      hint: /&shared_env/,
    },
  ],
  yaml_duplicate_key: [
    {
      code: 'LF_YAML_DUPLICATE_KEY',
      line: 7,
      column: 7,
      path: 'tasks[0].env.MODE',
      message: /"MODE" appears twice/,
    },
  ],
  yaml_alias_bomb: [
    { code: 'LF_YAML_ALIAS_LIMIT', line: 2, column: 10, path: '["x-b"][0]', message: /alias bomb/ },
  ],
  yaml_alias_recursive: [
    {
      code: 'LF_YAML_ALIAS_LIMIT',
      line: 2,
      column: 9,
      path: 'params.self',
      message: /inside the node it refers to/,
    },
  ],
  schema_unknown_key: [
    {
      code: 'LF_DAG_SCHEMA',
      line: 7,
      column: 5,
      path: 'tasks[1].depend_on',
      message: /unknown key "depend_on"/,
      hint: /did you mean "depends_on"\?/,
    },
  ],
  schema_airflow_key: [
    {
      code: 'LF_DAG_SCHEMA',
      line: 2,
      column: 1,
      path: 'schedule_interval',
      hint: /did you mean "schedule"\?/,
    },
    {
      code: 'LF_DAG_SCHEMA',
      line: 4,
      column: 5,
      path: 'tasks[0]',
      message: /neither command nor script/,
    },
    {
      code: 'LF_DAG_SCHEMA',
      line: 5,
      column: 5,
      path: 'tasks[0].bash_command',
      hint: /did you mean "command"\?/,
    },
  ],
  schema_wrong_type: [
    {
      code: 'LF_DAG_SCHEMA',
      line: 2,
      column: 10,
      path: 'catchup',
      message: /must be true or false, not the string "yes"/,
      hint: /catchup: true/,
    },
    {
      code: 'LF_DAG_SCHEMA',
      line: 6,
      column: 14,
      path: 'tasks[0].retries',
      hint: /remove the quotes: retries: 3/,
    },
  ],
  schema_out_of_range: [
    {
      code: 'LF_DAG_SCHEMA',
      line: 2,
      column: 18,
      path: 'max_active_runs',
      message: /is 0, but must be an integer ≥ 1/,
    },
    {
      code: 'LF_DAG_SCHEMA',
      line: 6,
      column: 14,
      path: 'tasks[0].retries',
      message: /from 0 to 100/,
      hint: /retries: 100/,
    },
  ],
  schema_missing_command: [
    {
      code: 'LF_DAG_SCHEMA',
      line: 5,
      column: 5,
      path: 'tasks[1]',
      message: /task "b" has neither command nor script/,
    },
  ],
  schema_tasks_mapping: [
    { code: 'LF_DAG_SCHEMA', line: 3, column: 3, path: 'tasks', hint: /- task_id: name/ },
  ],
  schema_empty_file: [{ code: 'LF_DAG_SCHEMA', line: 1, column: 1, path: '', message: /empty/ }],
  bad_id: [
    {
      code: 'LF_DAG_BAD_ID',
      line: 3,
      column: 14,
      path: 'tasks[0].task_id',
      message: /"load data"/,
      hint: /"load_data"/,
    },
  ],
  'bad dir name': [
    {
      code: 'LF_DAG_BAD_ID',
      line: 1,
      column: 1,
      path: 'dag_id',
      message: /folder name "bad dir name"/,
      hint: /dag_id: bad_dir_name/,
    },
  ],
  duplicate_task: [
    {
      code: 'LF_DAG_DUPLICATE_TASK',
      line: 7,
      column: 14,
      path: 'tasks[2].task_id',
      message: /already used by tasks\[0\]/,
    },
  ],
  unknown_upstream: [
    {
      code: 'LF_DAG_UNKNOWN_UPSTREAM',
      line: 7,
      column: 27,
      path: 'tasks[1].depends_on[1]',
      message: /"transfrom"/,
      hint: /did you mean "transform"\?|tasks: extract, load/,
    },
  ],
  cycle: [
    {
      code: 'LF_DAG_CYCLE',
      line: 5,
      column: 18,
      path: 'tasks[0].depends_on[0]',
      message: /extract → load → transform → extract/,
    },
  ],
  bad_cron: [
    { code: 'LF_DAG_BAD_CRON', line: 2, column: 11, path: 'schedule', message: /minute: 61/ },
  ],
  unknown_timezone: [
    {
      code: 'LF_DAG_UNKNOWN_TIMEZONE',
      line: 3,
      column: 20,
      path: 'schedule_timezone',
      message: /"Europe\/Pariss"/,
      hint: /did you mean "Europe\/Paris"\?/,
    },
  ],
  runner_labels_without_runner: [
    {
      code: 'LF_DAG_RUNNER_LABELS',
      line: 6,
      column: 7,
      path: 'tasks[0].runner_labels',
      message: /only to a task with executor: runner/,
      hint: /add executor: runner/,
    },
  ],
  kubernetes_bad_key: [
    {
      code: 'LF_DAG_KUBERNETES',
      line: 7,
      column: 18,
      path: 'tasks[0].kubernetes.namespace',
      message: /not a key a task may set/,
      hint: /operator's choice/,
    },
  ],
  reserved_env: [
    {
      code: 'LF_DAG_RESERVED_ENV',
      line: 7,
      column: 7,
      path: 'tasks[0].env.leoflow_token',
      message: /reserved/,
    },
  ],
  bad_env: [
    {
      code: 'LF_DAG_BAD_ENV',
      line: 6,
      column: 7,
      path: 'tasks[0].env["MY-VAR"]',
      hint: /"MY_VAR"/,
    },
  ],
  script_not_found: [
    {
      code: 'LF_DAG_SCRIPT_NOT_FOUND',
      line: 5,
      column: 13,
      path: 'tasks[0].script',
      message: /scripts\/missing.py/,
    },
  ],
  bad_script_path: [
    {
      code: 'LF_DAG_BAD_SCRIPT_PATH',
      line: 5,
      column: 13,
      path: 'tasks[0].script',
      message: /climbs out/,
    },
  ],
  command_and_script: [
    {
      code: 'LF_DAG_COMMAND_AND_SCRIPT',
      line: 5,
      column: 5,
      path: 'tasks[0].script',
      message: /both command and script/,
    },
  ],
  bad_date: [
    {
      code: 'LF_DAG_BAD_DATE',
      line: 2,
      column: 13,
      path: 'start_date',
      message: /day 30 does not exist in 2026-02/,
    },
  ],
  end_before_start: [
    {
      code: 'LF_DAG_BAD_DATE',
      line: 3,
      column: 11,
      path: 'end_date',
      message: /before start_date/,
    },
  ],
  duplicate_declaration: [
    {
      code: 'LF_DAG_DUPLICATE_DECLARATION',
      line: 2,
      column: 31,
      path: 'connections[2]',
      message: /"warehouse" is listed twice/,
    },
    {
      code: 'LF_DAG_DUPLICATE_DECLARATION',
      line: 6,
      column: 26,
      path: 'tasks[0].variables[1]',
      message: /collides with "api_key"/,
    },
  ],
  setup_teardown: [
    {
      code: 'LF_DAG_SETUP_TEARDOWN',
      line: 7,
      column: 14,
      path: 'tasks[1].setups[0]',
      message:
        /"create_cluster" is listed in the setups of "delete_cluster" but is not a setup task/,
      hint: /add setup: true/,
    },
    {
      code: 'LF_DAG_SETUP_TEARDOWN',
      line: 8,
      column: 19,
      path: 'tasks[1].trigger_rule',
      message: /teardown with trigger_rule all_success/,
      hint: /remove trigger_rule/,
    },
  ],
  branch: [
    {
      code: 'LF_DAG_BRANCH',
      line: 5,
      column: 40,
      path: 'tasks[0].branch.exit_codes["3"]',
      message: /branches to "incremental" on exit code 3/,
      hint: /did you mean "incremental_load"/,
    },
  ],
  expand: [
    {
      code: 'LF_DAG_EXPAND',
      line: 9,
      column: 21,
      path: 'tasks[1].expand.FILE.xcom',
      message: /"list_files", which pushes none/,
      hint: /do_xcom_push: true/,
    },
    {
      code: 'LF_DAG_EXPAND',
      line: 10,
      column: 7,
      path: 'tasks[1].expand.MODE',
      message: /MODE is both in env and in expand/,
    },
  ],
  expand_too_long: [
    {
      code: 'LF_DAG_EXPAND_TOO_LONG',
      line: 6,
      column: 7,
      path: 'tasks[0].expand',
      message: /expands to 6 map indexes; its max_map_length is 4/,
      hint: /max_map_length: 6/,
    },
  ],
  task_group: [
    {
      code: 'LF_DAG_TASK_GROUP',
      line: 5,
      column: 15,
      path: 'tasks[1].group_id',
      message: /group_id "extract" is already used by a task/,
    },
  ],
  many_errors: [
    { code: 'LF_DAG_BAD_CRON', line: 2, column: 11, path: 'schedule' },
    { code: 'LF_DAG_UNKNOWN_TIMEZONE', line: 3, column: 20, path: 'schedule_timezone' },
    { code: 'LF_DAG_UNKNOWN_UPSTREAM', line: 7, column: 18, path: 'tasks[0].depends_on[0]' },
    {
      code: 'LF_DAG_SCHEMA',
      line: 8,
      column: 19,
      path: 'tasks[0].trigger_rule',
      hint: /all_success/,
    },
    { code: 'LF_DAG_DUPLICATE_TASK', line: 9, column: 14, path: 'tasks[1].task_id' },
    { code: 'LF_DAG_RESERVED_ENV', line: 12, column: 7, path: 'tasks[1].env.LEOFLOW_RUN' },
  ],
};

/** Files that compile, with warnings. */
const WARN: Record<string, Expected[]> = {
  env_coerced: [
    {
      code: 'LF_DAG_ENV_COERCED',
      line: 6,
      column: 16,
      path: 'tasks[0].env.VERSION',
      message: /string "1.10"/,
    },
    {
      code: 'LF_DAG_ENV_COERCED',
      line: 7,
      column: 14,
      path: 'tasks[0].env.DEBUG',
      message: /string "true"/,
    },
  ],
  empty_declaration: [
    {
      code: 'LF_DAG_EMPTY_DECLARATION_INHERITS',
      line: 6,
      column: 16,
      path: 'tasks[0].variables',
      message: /\(api_key\)/,
    },
  ],
  catchup_without_start: [
    { code: 'LF_DAG_CATCHUP_WITHOUT_START', line: 3, column: 10, path: 'catchup' },
  ],
};

function toMatchers(list: Expected[]): unknown[] {
  return list.map(({ message, hint, ...rest }) => ({
    ...rest,
    file: 'leoflow.yaml',
    ...(message ? { message: expect.stringMatching(message) } : {}),
    ...(hint ? { hint: expect.stringMatching(hint) } : {}),
  }));
}

describe('bad leoflow.yaml fixtures', () => {
  for (const [name, expected] of Object.entries(BAD)) {
    it(`${name} → ${[...new Set(expected.map((e) => e.code))].join(', ')}`, () => {
      const r = expectErrors(compileFixture(join('bad', name)));
      expect(r.errors).toHaveLength(expected.length);
      expect(r.errors).toMatchObject(toMatchers(expected));
      for (const e of r.errors) {
        expect(e.severity).toBe('error');
        expect(e.hint.length).toBeGreaterThan(0);
      }
    });
  }

  it('custom tags only warn (LF_YAML_WARNING) and the tagged value is used as written', () => {
    const r = expectOk(compileFixture('bad/yaml_custom_tag'));
    expect(r.warnings).toMatchObject([
      {
        code: 'LF_YAML_WARNING',
        severity: 'warning',
        line: 3,
        column: 14,
        path: 'tasks[0].command',
      },
    ]);
    expect(r.spec.tasks[0]!.command).toBe('echo a');
  });

  it('the position points at the text of the offending value', () => {
    const text = readFileSync(join(FIXTURES, 'bad/unknown_upstream/leoflow.yaml'), 'utf8');
    const d = expectErrors(compileFixture('bad/unknown_upstream')).errors[0]!;
    const line = text.split('\n')[d.line - 1]!;
    expect(line.slice(d.column - 1).startsWith('transfrom')).toBe(true);
  });
});

describe('warning fixtures', () => {
  for (const [name, expected] of Object.entries(WARN)) {
    it(`${name} → ${expected[0]!.code}`, () => {
      const r = expectOk(compileFixture(join('warn', name)));
      expect(r.warnings).toMatchObject(
        toMatchers(expected).map((m) => ({ ...(m as object), severity: 'warning' })),
      );
      expect(r.warnings).toHaveLength(expected.length);
    });
  }

  it('an env value coerced with a warning keeps its source spelling', () => {
    const r = expectOk(compileFixture('warn/env_coerced'));
    expect(r.spec.tasks[0]!.env).toEqual({ VERSION: '1.10', DEBUG: 'true' });
  });
});

it('every documented code is produced by at least one fixture on disk', () => {
  const seen = new Set<string>();
  for (const list of [...Object.values(BAD), ...Object.values(WARN)])
    for (const e of list) seen.add(e.code);
  seen.add('LF_YAML_WARNING'); // yaml_custom_tag, asserted separately above
  // Refusals of the folder reader (server/dags/compile-folder.ts), which the in-memory reader of
  // these fixtures cannot produce: asserted in packages/server/test/scheduler/dags/compile-folder.test.ts
  // and test/security/dag-symlinks.test.ts.
  for (const code of [
    'LF_DAG_FILE_OUTSIDE_FOLDER',
    'LF_DAG_FILE_TOO_LARGE',
    'LF_DAG_FILE_NOT_REGULAR',
    // Needs the tenant's allowlist, so it is a registration-time refusal (server/dags/
    // registration.ts), asserted in packages/server/test/scheduler/dags/kubernetes-registration.test.ts.
    'LF_DAG_KUBERNETES_NOT_ALLOWED',
  ])
    seen.add(code);
  expect([...seen].sort()).toEqual(Object.values(DAG_ERROR_CODES).sort());
});

it('every code is documented in docs/authoring.md', () => {
  const doc = readFileSync(join(REPO_ROOT, 'docs/authoring.md'), 'utf8');
  for (const code of Object.values(DAG_ERROR_CODES)) expect(doc, code).toContain(`\`${code}\``);
});

describe('formatDiagnostic', () => {
  it('renders file:line:column CODE path: message and the hint', () => {
    const d = expectErrors(compileFixture('bad/cycle')).errors[0]!;
    expect(formatDiagnostic(d)).toBe(
      'leoflow.yaml:5:18 LF_DAG_CYCLE tasks[0].depends_on[0]: depends_on forms a cycle: extract → load → transform → extract (each arrow points from a task to a task it depends on)\n' +
        '  hint: remove one dependency of the cycle, e.g. "load" from the depends_on of "extract"',
    );
  });

  it('omits an empty path and marks warnings', () => {
    const base: CompileDiagnostic = {
      code: 'LF_X',
      severity: 'error',
      message: 'm',
      file: 'f.yaml',
      line: 1,
      column: 2,
      path: '',
      hint: 'h',
    };
    expect(formatDiagnostic(base)).toBe('f.yaml:1:2 LF_X: m\n  hint: h');
    expect(formatDiagnostic({ ...base, severity: 'warning', path: 'p', hint: '' })).toBe(
      'f.yaml:1:2 warning LF_X p: m',
    );
  });
});

describe('good fixtures', () => {
  it('full: every key, compiled to the exact spec', () => {
    const r = expectOk(compileFixture('good/full'));
    expect(r.warnings).toEqual([]);
    const expected: DagSpec = {
      schema_version: '1.0',
      dag_id: 'sales.daily-v2',
      description: "Loads yesterday's sales and builds the report.",
      owner: 'analytics',
      tags: ['sales', 'reporting'],
      // whitespace collapsed
      schedule: '30 6 * * 1-5',
      // case fixed to the IANA spelling
      schedule_timezone: 'Europe/Paris',
      // 02:30 local does not exist on 2026-03-29 (clocks jump 02:00 → 03:00): moved to 03:30 CEST
      start_date: '2026-03-29T01:30:00.000Z',
      end_date: '2026-12-31T22:59:59.500Z',
      catchup: true,
      max_active_runs: 2,
      max_active_tasks: 4,
      defaults: { retries: 3, retry_delay_seconds: 60, execution_timeout_seconds: 3600 },
      params: { region: 'eu', limits: { rows: 1000, ratio: 0.5 }, flags: [true, null] },
      variables: ['report_recipient', 'sales_threshold'],
      connections: ['warehouse_db'],
      tasks: [
        {
          task_id: 'extract',
          type: 'python',
          command: 'print("extract")\n',
          depends_on: [],
          trigger_rule: 'all_success',
          retries: 3,
          retry_delay_seconds: 60,
          execution_timeout_seconds: 3600,
          env: { TZ: 'Europe/Paris', LOG_LEVEL: 'info', BATCH: '500' },
          variables: [],
          connections: ['warehouse_db'],
          do_xcom_push: true,
        },
        {
          task_id: 'transform',
          type: 'node',
          command: 'console.log("transform")',
          depends_on: ['extract'],
          trigger_rule: 'all_success',
          retries: 0,
          retry_delay_seconds: 60,
          execution_timeout_seconds: null,
          env: { TZ: 'Europe/Paris', LOG_LEVEL: 'info' },
          variables: [],
          connections: [],
          do_xcom_push: false,
        },
        {
          task_id: 'report',
          type: 'bash',
          command: './scripts/report.sh --date "$AIRFLOW_CTX_LOGICAL_DATE"',
          depends_on: ['extract', 'transform'],
          trigger_rule: 'all_done',
          retries: 3,
          retry_delay_seconds: 0,
          execution_timeout_seconds: 3600,
          env: {},
          variables: ['report_recipient'],
          connections: [],
          do_xcom_push: false,
        },
      ],
    };
    expect(r.spec).toStrictEqual(expected);
    // Key order of dag.json follows the DagSpec declaration, so diffs of dag.json stay readable.
    expect(Object.keys(r.spec)).toEqual(Object.keys(expected));
  });

  it('minimal: dag_id from the folder name and every default filled in', () => {
    const r = expectOk(compileFixture('good/minimal'));
    expect(r.spec).toStrictEqual({
      schema_version: '1.0',
      dag_id: 'minimal',
      description: '',
      owner: '',
      tags: [],
      schedule: null,
      schedule_timezone: 'UTC',
      start_date: null,
      end_date: null,
      catchup: false,
      max_active_runs: 16,
      max_active_tasks: 0,
      defaults: { retries: 0, retry_delay_seconds: 300, execution_timeout_seconds: null },
      params: {},
      variables: [],
      connections: [],
      tasks: [
        {
          task_id: 'hello',
          type: 'bash',
          command: 'echo hello',
          depends_on: [],
          trigger_rule: 'all_success',
          retries: 0,
          retry_delay_seconds: 300,
          execution_timeout_seconds: null,
          env: {},
          variables: [],
          connections: [],
          do_xcom_push: false,
        },
      ],
    });
  });
});
