import { describe, expect, it, vi } from 'vitest';
import { compileDagYaml, LeoflowError } from '@leoflow/core';
import { compileText, expectErrors, expectOk } from './helpers.js';

const task = (extra = ''): string => `tasks:\n  - task_id: a\n    command: echo a\n${extra}`;

describe('defaults inheritance', () => {
  const yaml = `
defaults:
  retries: 2
  retry_delay_seconds: 30
  execution_timeout_seconds: 600
tasks:
  - task_id: inherits
    command: echo 1
  - task_id: overrides
    command: echo 2
    retries: 5
    retry_delay_seconds: 0
    execution_timeout_seconds: 10
  - task_id: no_timeout
    command: echo 3
    execution_timeout_seconds: null
  - task_id: empty_means_default
    command: echo 4
    retries:
`;
  const spec = expectOk(compileText(yaml)).spec;
  const pick = (i: number) => {
    const t = spec.tasks[i]!;
    return [t.retries, t.retry_delay_seconds, t.execution_timeout_seconds];
  };

  it('a task without its own value takes the DAG default', () =>
    expect(pick(0)).toEqual([2, 30, 600]));
  it('a task value overrides the default, including 0', () => expect(pick(1)).toEqual([5, 0, 10]));
  it('execution_timeout_seconds: null on a task means "no timeout", not "inherit"', () =>
    expect(pick(2)).toEqual([2, 30, null]));
  it('an empty value (key with nothing after it) inherits', () =>
    expect(pick(3)).toEqual([2, 30, 600]));
  it('the defaults block itself is compiled into the spec', () =>
    expect(spec.defaults).toEqual({
      retries: 2,
      retry_delay_seconds: 30,
      execution_timeout_seconds: 600,
    }));

  it('without a defaults block: retries 0, retry_delay 300 s, no timeout', () => {
    const t = expectOk(compileText(task())).spec.tasks[0]!;
    expect([t.retries, t.retry_delay_seconds, t.execution_timeout_seconds]).toEqual([0, 300, null]);
  });

  it('defaults accepts only the three task settings', () => {
    const r = expectErrors(
      compileText(`defaults:\n  trigger_rule: all_done\n  retrys: 1\n${task()}`),
    );
    expect(r.errors.map((e) => [e.path, e.hint])).toEqual([
      ['defaults.trigger_rule', 'trigger_rule cannot be defaulted; set it on each task'],
      ['defaults.retrys', 'did you mean "retries"?'],
    ]);
  });
});

describe('DAG keys', () => {
  it('dag_id defaults to dirName and an explicit one wins', () => {
    expect(expectOk(compileText(task(), {}, 'from_folder')).spec.dag_id).toBe('from_folder');
    expect(
      expectOk(compileText(`dag_id: explicit\n${task()}`, {}, 'from_folder')).spec.dag_id,
    ).toBe('explicit');
  });

  it.each([
    ['"@annually"', '@yearly'],
    ['"@midnight"', '@daily'],
    ['"@DAILY"', '@daily'],
    ['"@once"', '@once'],
    ['"  */15   *  * * *  "', '*/15 * * * *'],
    ['"0 0 * * MON-FRI"', '0 0 * * MON-FRI'],
    ['null', null],
    ['', null],
  ])('schedule %s compiles to %s', (written, compiled) => {
    expect(expectOk(compileText(`schedule: ${written}\n${task()}`)).spec.schedule).toBe(compiled);
  });

  it.each([
    [
      '"0 0 0 * * *"',
      /6 field\(s\); exactly 5 are required \(Leoflow schedules have minute precision/,
    ],
    ['"@continuous"', /not a schedule preset/],
    ['"0 0 31 2 *"', /never matches a real date/],
    ['none', /is a string, not "no schedule"/],
    ['"0 25 * * *"', /invalid/],
  ])('schedule %s is LF_DAG_BAD_CRON', (written, message) => {
    const r = expectErrors(compileText(`schedule: ${written}\n${task()}`));
    expect(r.errors).toMatchObject([
      {
        code: 'LF_DAG_BAD_CRON',
        path: 'schedule',
        line: 1,
        column: 11,
        message: expect.stringMatching(message),
      },
    ]);
  });

  it('an unquoted @preset is a YAML error whose hint says to quote it', () => {
    const r = expectErrors(compileText(`schedule: @daily\n${task()}`));
    expect(r.errors).toMatchObject([
      {
        code: 'LF_YAML_SYNTAX',
        line: 1,
        column: 11,
        path: 'schedule',
        hint: expect.stringContaining('schedule: "@daily"'),
      },
    ]);
  });

  it('schedule of the wrong type is LF_DAG_SCHEMA', () => {
    const r = expectErrors(compileText(`schedule: 5\n${task()}`));
    expect(r.errors).toMatchObject([
      { code: 'LF_DAG_SCHEMA', path: 'schedule', hint: 'quote it: schedule: "5"' },
    ]);
  });

  it.each([
    ['UTC', 'UTC'],
    ['utc', 'UTC'],
    ['America/New_York', 'America/New_York'],
    ['US/Pacific', 'US/Pacific'],
  ])('schedule_timezone %s is stored as %s', (written, stored) => {
    expect(
      expectOk(compileText(`schedule_timezone: ${written}\n${task()}`)).spec.schedule_timezone,
    ).toBe(stored);
  });

  it('an unknown zone written as a city gets the IANA name as a hint', () => {
    const r = expectErrors(compileText(`schedule_timezone: New York\n${task()}`));
    expect(r.errors[0]!.hint).toMatch(/^did you mean "America\/New_York"\?/);
  });

  it.each(['Mars/Olympus', '"+01:00"', '""'])(
    'schedule_timezone %s is LF_DAG_UNKNOWN_TIMEZONE',
    (tz) => {
      const r = expectErrors(compileText(`schedule_timezone: ${tz}\n${task()}`));
      expect(r.errors).toMatchObject([
        { code: 'LF_DAG_UNKNOWN_TIMEZONE', path: 'schedule_timezone' },
      ]);
    },
  );

  describe('dates', () => {
    const start = (written: string, tz = 'UTC'): string | null =>
      expectOk(compileText(`schedule_timezone: ${tz}\nstart_date: ${written}\n${task()}`)).spec
        .start_date;

    it.each([
      ['2026-01-01', '2026-01-01T00:00:00.000Z'],
      ['"2026-01-01"', '2026-01-01T00:00:00.000Z'],
      ['2026-01-01T06:30:00Z', '2026-01-01T06:30:00.000Z'],
      ['2026-01-01 06:30', '2026-01-01T06:30:00.000Z'],
      ['2026-1-2 6:05:09', '2026-01-02T06:05:09.000Z'],
      ['2026-01-01T06:30:00.123456Z', '2026-01-01T06:30:00.123Z'],
      ['2026-01-01T06:30:00+02:00', '2026-01-01T04:30:00.000Z'],
      ['2026-01-01T06:30:00-0530', '2026-01-01T12:00:00.000Z'],
      ['2001-12-14 21:59:43.10 -5', '2001-12-15T02:59:43.100Z'],
      ['2024-02-29', '2024-02-29T00:00:00.000Z'],
    ])('%s → %s', (written, iso) => expect(start(written)).toBe(iso));

    it('a date without an offset is read in schedule_timezone', () => {
      expect(start('2026-01-01', 'Europe/Berlin')).toBe('2025-12-31T23:00:00.000Z');
      expect(start('2026-07-01 12:00', 'America/New_York')).toBe('2026-07-01T16:00:00.000Z');
      // an explicit offset wins over the zone
      expect(start('2026-01-01T00:00:00Z', 'Europe/Berlin')).toBe('2026-01-01T00:00:00.000Z');
    });

    it('a wall time repeated by a DST fall-back takes its first occurrence', () => {
      // 2026-10-25 02:30 happens twice in Paris: at 00:30Z (CEST) and 01:30Z (CET)
      expect(start('2026-10-25 02:30', 'Europe/Paris')).toBe('2026-10-25T00:30:00.000Z');
      // 2026-11-01 01:30 happens twice in New York: 05:30Z (EDT) and 06:30Z (EST)
      expect(start('2026-11-01 01:30', 'America/New_York')).toBe('2026-11-01T05:30:00.000Z');
    });

    it('a wall time skipped by a DST jump moves forward by the jump', () => {
      expect(start('2026-03-08 02:30', 'America/New_York')).toBe('2026-03-08T07:30:00.000Z');
    });

    it.each([
      ['2026-13-01', /month 13/],
      ['2023-02-29', /day 29 does not exist/],
      ['2026-01-01T24:00', /hour 24/],
      ['2026-01-01T10:60', /minute 60/],
      ['tomorrow', /not a date/],
      ['2026-01-01T00:00:00+25:00', /offset/],
      ['0000-01-01', /year 0000/],
    ])('%s is LF_DAG_BAD_DATE', (written, message) => {
      const r = expectErrors(compileText(`start_date: ${written}\n${task()}`));
      expect(r.errors).toMatchObject([
        { code: 'LF_DAG_BAD_DATE', path: 'start_date', message: expect.stringMatching(message) },
      ]);
    });

    it('a number is LF_DAG_SCHEMA', () => {
      const r = expectErrors(compileText(`end_date: 20260101\n${task()}`));
      expect(r.errors).toMatchObject([{ code: 'LF_DAG_SCHEMA', path: 'end_date' }]);
    });

    it('end_date equal to start_date is allowed; before it is not', () => {
      expectOk(compileText(`start_date: 2026-01-01\nend_date: 2026-01-01T00:00:00Z\n${task()}`));
      expectErrors(
        compileText(`start_date: 2026-01-02\nend_date: 2026-01-01T23:59:59Z\n${task()}`),
      );
    });
  });

  it('max_active_tasks accepts 0 (unlimited); max_active_runs does not', () => {
    expect(expectOk(compileText(`max_active_tasks: 0\n${task()}`)).spec.max_active_tasks).toBe(0);
    expectErrors(compileText(`max_active_runs: 0\n${task()}`));
    expectErrors(compileText(`max_active_tasks: -1\n${task()}`));
    expectErrors(compileText(`max_active_tasks: 2.5\n${task()}`));
    expectErrors(compileText(`max_active_runs: 2147483648\n${task()}`));
  });

  it('params keep any JSON value but reject what JSON cannot hold', () => {
    const ok = expectOk(
      compileText(
        `params:\n  n: 1\n  s: x\n  list: [1, {a: b}]\n  "__proto__": {polluted: true}\n${task()}`,
      ),
    );
    expect(Object.keys(ok.spec.params)).toEqual(['n', 's', 'list', '__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const r = expectErrors(
      compileText(`params:\n  big: .inf\n  blob: !!binary aGVsbG8=\n${task()}`),
    );
    expect(r.errors.map((e) => [e.code, e.path])).toEqual([
      ['LF_DAG_SCHEMA', 'params.big'],
      ['LF_DAG_SCHEMA', 'params.blob'],
    ]);
  });

  it('x-* top-level keys are scratch space for anchors', () => {
    const r = expectOk(
      compileText(`x-env: &e {A: "1"}\ntasks:\n  - task_id: a\n    command: echo\n    env: *e\n`),
    );
    expect(r.spec.tasks[0]!.env).toEqual({ A: '1' });
  });

  it('task-only keys at the top level say where they belong', () => {
    const r = expectErrors(compileText(`retries: 3\ncommand: echo\n${task()}`));
    expect(r.errors.map((e) => e.hint)).toEqual([
      'retries is a task setting; set it for every task under defaults:, or on each task',
      'command is a task key; put it on a task under tasks:',
    ]);
  });

  it('a DAG-level key inside a task says where it belongs', () => {
    const r = expectErrors(compileText(task('    schedule: "@daily"\n')));
    expect(r.errors).toMatchObject([
      {
        path: 'tasks[0].schedule',
        hint: 'schedule is a DAG-level key; move it to the top of the file',
      },
    ]);
  });

  it('unknown keys far from any known one list the allowed keys', () => {
    const r = expectErrors(compileText(task('    zzzzzzzz: 1\n')));
    expect(r.errors[0]!.hint).toMatch(/^allowed keys here: task_id, type, command/);
  });

  it('missing or empty tasks is an error', () => {
    expect(expectErrors(compileText('dag_id: x\n')).errors).toMatchObject([
      { code: 'LF_DAG_SCHEMA', path: 'tasks', line: 1, column: 1 },
    ]);
    expect(expectErrors(compileText('dag_id: x\ntasks: []\n')).errors).toMatchObject([
      { code: 'LF_DAG_SCHEMA', path: 'tasks', line: 2, column: 8 },
    ]);
    expect(expectErrors(compileText('dag_id: x\ntasks:\n')).errors).toMatchObject([
      { code: 'LF_DAG_SCHEMA', path: 'tasks', line: 2, column: 1 },
    ]);
  });

  it('a document that is not a mapping is an error', () => {
    expect(expectErrors(compileText('- a\n- b\n')).errors).toMatchObject([
      { code: 'LF_DAG_SCHEMA', path: '' },
    ]);
    expect(expectErrors(compileText('just text\n')).errors).toMatchObject([
      { code: 'LF_DAG_SCHEMA', path: '' },
    ]);
  });

  it('tags must be unique non-empty strings', () => {
    const r = expectErrors(compileText(`tags: [a, "", 3, a]\n${task()}`));
    expect(r.errors.map((e) => [e.code, e.path])).toEqual([
      ['LF_DAG_SCHEMA', 'tags[1]'],
      ['LF_DAG_SCHEMA', 'tags[2]'],
      ['LF_DAG_DUPLICATE_DECLARATION', 'tags[3]'],
    ]);
  });

  it('a single string where a list is expected gets a list hint', () => {
    const r = expectErrors(compileText(`connections: warehouse\n${task()}`));
    expect(r.errors).toMatchObject([
      {
        code: 'LF_DAG_SCHEMA',
        path: 'connections',
        hint: 'write a list: connections: [warehouse]',
      },
    ]);
  });

  it('variable keys and connection ids follow the id pattern', () => {
    const r = expectErrors(
      compileText(`variables: [ok, "has space"]\n${task('    connections: ["-bad"]\n')}`),
    );
    expect(r.errors.map((e) => [e.code, e.path])).toEqual([
      ['LF_DAG_BAD_ID', 'variables[1]'],
      ['LF_DAG_BAD_ID', 'tasks[0].connections[0]'],
    ]);
  });
});

describe('tasks', () => {
  it('type defaults to bash; python and node are accepted; others get a did-you-mean', () => {
    expect(expectOk(compileText(task())).spec.tasks[0]!.type).toBe('bash');
    const r = expectErrors(compileText(task('    type: pyhton\n')));
    expect(r.errors).toMatchObject([
      { code: 'LF_DAG_SCHEMA', path: 'tasks[0].type', hint: 'did you mean type: python?' },
    ]);
  });

  it('trigger_rule accepts the five rules', () => {
    for (const rule of ['all_success', 'all_failed', 'all_done', 'one_success', 'one_failed']) {
      expect(
        expectOk(compileText(task(`    trigger_rule: ${rule}\n`))).spec.tasks[0]!.trigger_rule,
      ).toBe(rule);
    }
  });

  it('script: is read through readScript with a normalised relative path and stored in command', () => {
    const readScript = vi.fn((rel: string) =>
      rel === 'bin/run.sh' ? 'echo from file\n' : undefined,
    );
    const r = compileDagYaml({
      text: 'tasks:\n  - task_id: a\n    script: ./bin//run.sh\n',
      fileName: 'dags/x/leoflow.yaml',
      dirName: 'x',
      readScript,
    });
    expect(expectOk(r).spec.tasks[0]!.command).toBe('echo from file\n');
    expect(readScript).toHaveBeenCalledWith('bin/run.sh');
  });

  it.each([
    ['/etc/passwd', /absolute/],
    ['C:/x.sh', /absolute/],
    ['~/x.sh', /absolute/],
    ['a/../../x.sh', /climbs out/],
    ['a\\\\b.sh', /backslashes/],
    ['./', /names no file/],
  ])('script %s is LF_DAG_BAD_SCRIPT_PATH and readScript is never called', (path, message) => {
    const readScript = vi.fn(() => 'x');
    const r = compileDagYaml({
      text: `tasks:\n  - task_id: a\n    script: "${path}"\n`,
      fileName: 'leoflow.yaml',
      dirName: 'x',
      readScript,
    });
    expect(expectErrors(r).errors).toMatchObject([
      { code: 'LF_DAG_BAD_SCRIPT_PATH', message: expect.stringMatching(message) },
    ]);
    expect(readScript).not.toHaveBeenCalled();
  });

  it('a readScript that throws reports LF_DAG_SCRIPT_NOT_FOUND with the reason', () => {
    const r = compileDagYaml({
      text: 'tasks:\n  - task_id: a\n    script: x.sh\n',
      fileName: 'leoflow.yaml',
      dirName: 'x',
      readScript: () => {
        throw new Error('EACCES: permission denied');
      },
    });
    expect(expectErrors(r).errors).toMatchObject([
      { code: 'LF_DAG_SCRIPT_NOT_FOUND', message: expect.stringMatching(/EACCES/) },
    ]);
  });

  it.each(['LF_DAG_FILE_OUTSIDE_FOLDER', 'LF_DAG_FILE_TOO_LARGE', 'LF_DAG_FILE_NOT_REGULAR'])(
    'a readScript refusing the file with %s reports that code and its message',
    (code) => {
      const r = compileDagYaml({
        text: 'tasks:\n  - task_id: a\n    script: x.sh\n',
        fileName: 'leoflow.yaml',
        dirName: 'x',
        readScript: () => {
          throw new LeoflowError(code, '"x.sh" refused');
        },
      });
      expect(expectErrors(r).errors).toMatchObject([
        { code, message: '"x.sh" refused', path: 'tasks[0].script' },
      ]);
    },
  );

  it('an empty command or script is an error', () => {
    expect(
      expectErrors(compileText('tasks:\n  - task_id: a\n    command: "  "\n')).errors,
    ).toMatchObject([{ code: 'LF_DAG_SCHEMA', path: 'tasks[0].command' }]);
    expect(
      expectErrors(compileText('tasks:\n  - task_id: a\n    script: e.sh\n', { 'e.sh': '\n' }))
        .errors,
    ).toMatchObject([{ code: 'LF_DAG_SCHEMA', path: 'tasks[0].script' }]);
  });

  it('a task without task_id is reported once, and its other keys are still checked', () => {
    const r = expectErrors(compileText('tasks:\n  - command: echo\n    env: {LEOFLOW_X: y}\n'));
    expect(r.errors.map((e) => [e.code, e.path])).toEqual([
      ['LF_DAG_SCHEMA', 'tasks[0]'],
      ['LF_DAG_RESERVED_ENV', 'tasks[0].env.LEOFLOW_X'],
    ]);
  });

  it('a task that is not a mapping is reported at its item', () => {
    const r = expectErrors(
      compileText('tasks:\n  - echo hello\n  - task_id: b\n    command: echo\n'),
    );
    expect(r.errors).toMatchObject([
      { code: 'LF_DAG_SCHEMA', path: 'tasks[0]', line: 2, column: 5 },
    ]);
  });

  it('depends_on order is kept and a task may depend on a later one', () => {
    const r = expectOk(
      compileText(
        'tasks:\n  - task_id: c\n    command: x\n    depends_on: [b, a]\n  - task_id: a\n    command: x\n  - task_id: b\n    command: x\n',
      ),
    );
    expect(r.spec.tasks.map((t) => t.depends_on)).toEqual([['b', 'a'], [], []]);
  });

  it('a task depending on itself is a one-task cycle', () => {
    const r = expectErrors(compileText(task('    depends_on: [a]\n')));
    expect(r.errors).toMatchObject([
      {
        code: 'LF_DAG_CYCLE',
        path: 'tasks[0].depends_on[0]',
        message: 'task "a" depends on itself',
      },
    ]);
  });

  it('depends_on listing the same task twice is LF_DAG_DUPLICATE_DECLARATION', () => {
    const r = expectErrors(
      compileText(
        `tasks:\n  - task_id: a\n    command: x\n  - task_id: b\n    command: x\n    depends_on: [a, a]\n`,
      ),
    );
    expect(r.errors).toMatchObject([
      { code: 'LF_DAG_DUPLICATE_DECLARATION', path: 'tasks[1].depends_on[1]' },
    ]);
  });

  it('a long cycle is shown with both ends and a count of the middle', () => {
    const n = 30;
    const tasks = Array.from(
      { length: n },
      (_, i) => `  - {task_id: t${i}, command: x, depends_on: [t${(i + 1) % n}]}`,
    );
    const r = expectErrors(compileText(`tasks:\n${tasks.join('\n')}\n`));
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]!.message).toContain(
      't0 → t1 → t2 → t3 → t4 → t5 → t6 → t7 → t8 → t9 → … (11 more) → t21',
    );
    expect(r.errors[0]!.message).toContain('t29 → t0 (each arrow');
  });

  it('two separate cycles are two errors', () => {
    const r = expectErrors(
      compileText(`tasks:
  - {task_id: a, command: x, depends_on: [b]}
  - {task_id: b, command: x, depends_on: [a]}
  - {task_id: c, command: x, depends_on: [d]}
  - {task_id: d, command: x, depends_on: [c]}
`),
    );
    expect(r.errors.map((e) => e.message)).toEqual([
      expect.stringContaining('a → b → a'),
      expect.stringContaining('c → d → c'),
    ]);
  });

  describe('env', () => {
    it('merge keys and aliases resolve, explicit keys win over merged ones', () => {
      const r = expectOk(
        compileText(`x-base: &base {A: "1", B: "2"}
x-more: &more {B: "3", C: "4"}
tasks:
  - task_id: a
    command: x
    env:
      <<: [*base, *more]
      A: override
`),
      );
      expect(r.spec.tasks[0]!.env).toEqual({ B: '2', C: '4', A: 'override' });
    });

    it('LEOFLOW_ is reserved in any case', () => {
      for (const key of ['LEOFLOW_TOKEN', 'leoflow_x', 'LeoFlow_Y']) {
        const r = expectErrors(compileText(task(`    env: {${key}: v}\n`)));
        expect(r.errors).toMatchObject([
          { code: 'LF_DAG_RESERVED_ENV', path: `tasks[0].env.${key}` },
        ]);
      }
      expectOk(compileText(task('    env: {LEOFLOWX: v, MY_LEOFLOW_X: v}\n')));
    });

    it('a key named __proto__ stays an ordinary entry', () => {
      const r = expectOk(compileText(task('    env: {"__proto__": x}\n')));
      expect(Object.keys(r.spec.tasks[0]!.env)).toEqual(['__proto__']);
    });

    it('null, list and mapping values are errors with a fix', () => {
      const r = expectErrors(compileText(task('    env:\n      A:\n      B: [1]\n')));
      expect(r.errors).toMatchObject([
        { code: 'LF_DAG_SCHEMA', path: 'tasks[0].env.A', hint: 'write A: "" for an empty value' },
        { code: 'LF_DAG_SCHEMA', path: 'tasks[0].env.B' },
      ]);
    });

    it('a NUL byte in a value is LF_DAG_BAD_ENV', () => {
      const r = expectErrors(compileText(task('    env: {A: "x\\0y"}\n')));
      expect(r.errors).toMatchObject([{ code: 'LF_DAG_BAD_ENV', path: 'tasks[0].env.A' }]);
    });
  });

  it('do_xcom_push defaults to false and must be a boolean', () => {
    expect(expectOk(compileText(task())).spec.tasks[0]!.do_xcom_push).toBe(false);
    expect(
      expectOk(compileText(task('    do_xcom_push: true\n'))).spec.tasks[0]!.do_xcom_push,
    ).toBe(true);
    expect(expectErrors(compileText(task('    do_xcom_push: "no"\n'))).errors[0]!.hint).toBe(
      'write do_xcom_push: false (YAML 1.2 reads "no" as a string)',
    );
  });
});

describe('robustness', () => {
  it('reports every independent problem in one pass, sorted by position', () => {
    const r = expectErrors(
      compileText(`dag_id: "bad id"
schedule: "* *"
tasks:
  - task_id: a
    command: x
    retries: -1
  - task_id: b
    command: y
    depends_on: [zz]
`),
    );
    expect(r.errors.map((e) => `${e.line}:${e.code}`)).toEqual([
      '1:LF_DAG_BAD_ID',
      '2:LF_DAG_BAD_CRON',
      '6:LF_DAG_SCHEMA',
      '9:LF_DAG_UNKNOWN_UPSTREAM',
    ]);
  });

  it('many tasks sharing one anchor are not mistaken for an alias bomb', () => {
    const tasks = Array.from(
      { length: 300 },
      (_, i) => `  - {task_id: t${i}, command: x, env: *e}`,
    );
    const r = expectOk(compileText(`x-env: &e {A: "1", B: "2"}\ntasks:\n${tasks.join('\n')}\n`));
    expect(r.spec.tasks[299]!.env).toEqual({ A: '1', B: '2' });
  });

  it('a file nested thousands of levels deep is an error, not a stack overflow', () => {
    const deep = Array.from({ length: 6000 }, (_, i) => `${' '.repeat(i + 2)}k:`).join('\n');
    const r = expectErrors(compileText(`params:\n${deep} 1\n${task()}`));
    expect(r.errors[0]).toMatchObject({ code: 'LF_YAML_SYNTAX', line: 1, column: 1 });
  });

  it('never throws, whatever the text', () => {
    for (const text of [
      '',
      '\t',
      ':',
      '- - -',
      '{',
      'tasks: &a [*a]',
      'tasks:\n  - <<: 5',
      '? [a]\n: b',
      '%YAML 1.1\n---\na: 1',
      '\u0000',
      'a: !!int x',
    ]) {
      expect(() => compileText(text)).not.toThrow();
      expect(compileText(text).ok).toBe(false);
    }
  });

  it('positions after a multi-line quoted string are still exact', () => {
    const r = expectErrors(
      compileText(
        'tasks:\n  - task_id: a\n    command: "echo one\n      two\n      three"\n    retries: x\n',
      ),
    );
    expect(r.errors).toMatchObject([{ path: 'tasks[0].retries', line: 6, column: 14 }]);
  });

  it('accepts a UTF-8 BOM and CRLF line endings', () => {
    const r = expectOk(
      compileText('\uFEFFdag_id: crlf\r\ntasks:\r\n  - task_id: a\r\n    command: echo a\r\n'),
    );
    expect(r.spec.tasks[0]!.command).toBe('echo a');
  });
});
