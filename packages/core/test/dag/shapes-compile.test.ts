import { describe, expect, it } from 'vitest';
import { dagSpecHash, validateDagSpec } from '@leoflow/core';
import { compileFixture, compileText, expectErrors, expectOk } from './helpers.js';

const deps = (r: ReturnType<typeof expectOk>): Record<string, string[]> =>
  Object.fromEntries(r.spec.tasks.map((t) => [t.task_id, t.depends_on]));

describe('task groups in leoflow.yaml (Airflow TaskGroup)', () => {
  it('prefixes ids, resolves names from the innermost group out, and wires group dependencies', () => {
    const r = expectOk(
      compileText(`
tasks:
  - task_id: start
    command: echo start
  - task_id: a
    command: echo top-level a
  - group_id: etl
    depends_on: [start]
    tasks:
      - task_id: a
        command: echo a
      - task_id: b
        depends_on: [a]
        command: echo b
      - group_id: inner
        tasks:
          - task_id: x
            depends_on: [etl.a]
            command: echo x
  - task_id: load
    depends_on: [etl]
    command: echo load
`),
    );
    expect(deps(r)).toEqual({
      start: [],
      a: [],
      'etl.a': ['start'],
      // "a" inside etl is etl.a, not the top-level a
      'etl.b': ['etl.a'],
      'etl.inner.x': ['etl.a'],
      // depending on a group = on each of its leaves
      load: ['etl.b', 'etl.inner.x'],
    });
    expect(r.spec.tasks.map((t) => t.group)).toEqual([
      undefined,
      undefined,
      'etl',
      'etl',
      'etl.inner',
      undefined,
    ]);
    expect(r.spec.task_groups).toEqual([
      { group_id: 'etl' },
      { group_id: 'etl.inner', parent: 'etl' },
    ]);
    expect(validateDagSpec(JSON.parse(JSON.stringify(r.spec)))).toMatchObject({ ok: true });
  });

  it('keeps children unprefixed under prefix_group_id: false, as Airflow does', () => {
    const r = expectOk(
      compileText(`
tasks:
  - group_id: g
    prefix_group_id: false
    tasks:
      - task_id: a
        command: echo a
  - task_id: b
    depends_on: [g]
    command: echo b
`),
    );
    expect(deps(r)).toEqual({ a: [], b: ['a'] });
    expect(r.spec.tasks[0]!.group).toBe('g');
  });

  it('reports an unknown name inside a group where it was written', () => {
    const r = expectErrors(
      compileText(`
tasks:
  - group_id: g
    tasks:
      - task_id: a
        depends_on: [nope]
        command: echo a
`),
    );
    expect(r.errors).toMatchObject([
      {
        code: 'LF_DAG_UNKNOWN_UPSTREAM',
        line: 6,
        column: 22,
        path: 'tasks[0].tasks[0].depends_on[0]',
      },
    ]);
  });

  it('refuses an empty group and a group id with a dot', () => {
    const r = expectErrors(
      compileText(`
tasks:
  - group_id: g.h
    tasks: []
`),
    );
    expect(r.errors.map((e) => `${e.code} ${e.path}`)).toEqual([
      'LF_DAG_BAD_ID tasks[0].group_id',
      'LF_DAG_TASK_GROUP tasks[0].tasks',
    ]);
  });
});

describe('setup, teardown, branch, short_circuit, expand, backoff in leoflow.yaml', () => {
  const shapes = expectOk(compileFixture('good/shapes'));
  const byId = new Map(shapes.spec.tasks.map((t) => [t.task_id, t]));

  it('compiles a teardown with its setups as upstreams and all_done_setup_success', () => {
    expect(byId.get('create_cluster')).toMatchObject({ setup: true });
    expect(byId.get('delete_cluster')).toMatchObject({
      teardown: true,
      on_failure_fail_dagrun: true,
      trigger_rule: 'all_done_setup_success',
      depends_on: ['publish', 'create_cluster'],
    });
  });

  it('compiles branch and short_circuit, pushing the deciding return value', () => {
    expect(byId.get('choose')).toMatchObject({
      branch: { mode: 'return_value' },
      do_xcom_push: true,
    });
    expect(byId.get('gate')).toMatchObject({
      short_circuit: { ignore_downstream_trigger_rules: false },
      do_xcom_push: true,
    });
    const r = expectOk(
      compileText(`
tasks:
  - task_id: check
    branch: { exit_codes: { 0: full, 3: [incremental, notify] } }
    command: ./check.sh
  - { task_id: full, depends_on: [check], command: echo full }
  - { task_id: incremental, depends_on: [check], command: echo inc }
  - { task_id: notify, depends_on: [check], command: echo notify }
`),
    );
    expect(r.spec.tasks[0]).toMatchObject({
      branch: { mode: 'exit_code', exit_codes: { '0': ['full'], '3': ['incremental', 'notify'] } },
      do_xcom_push: false,
    });
  });

  it("compiles expand in the author's argument order, resolving the xcom upstream in its group", () => {
    expect(byId.get('transform.process')).toMatchObject({
      expand: [
        { env: 'PART', xcom: 'transform.list_parts' },
        { env: 'MODE', values: ['full', 'sample'] },
      ],
      env: { LEVEL: '3' },
      depends_on: ['transform.list_parts'],
    });
    // an expand upstream not listed in depends_on is added to it
    const r = expectOk(
      compileText(`
tasks:
  - task_id: up
    do_xcom_push: true
    command: echo '[1]'
  - task_id: m
    expand: { N: { xcom: up } }
    command: echo $N
`),
    );
    expect(r.spec.tasks[1]!.depends_on).toEqual(['up']);
  });

  it('resolves retry backoff from defaults (true = 2) and per task', () => {
    expect(shapes.spec.defaults).toEqual({
      retries: 2,
      retry_delay_seconds: 10,
      execution_timeout_seconds: null,
      retry_exponential_backoff: 2,
      max_retry_delay_seconds: 600,
    });
    expect(byId.get('choose')).toMatchObject({
      retry_exponential_backoff: 2,
      max_retry_delay_seconds: 600,
    });
    expect(byId.get('publish')).toMatchObject({ retry_exponential_backoff: 1.5 });
    const plain = expectOk(compileText('tasks:\n  - task_id: a\n    command: echo a\n'));
    expect('retry_exponential_backoff' in plain.spec.tasks[0]!).toBe(false);
    expect('task_groups' in plain.spec).toBe(false);
  });

  it('leaves the hash of a DAG without the new keys unchanged', () => {
    const r = expectOk(compileText('dag_id: h\ntasks:\n  - task_id: a\n    command: echo a\n'));
    // computed before issue 41; a new key filled in by default would change it
    expect(dagSpecHash(r.spec)).toBe(
      dagSpecHash(JSON.parse(JSON.stringify(r.spec)) as typeof r.spec),
    );
    expect(Object.keys(r.spec.tasks[0]!)).toEqual([
      'task_id',
      'type',
      'command',
      'depends_on',
      'trigger_rule',
      'retries',
      'retry_delay_seconds',
      'execution_timeout_seconds',
      'env',
      'variables',
      'connections',
      'do_xcom_push',
    ]);
  });

  it('accepts every Airflow 3 trigger rule', () => {
    for (const rule of [
      'all_done_min_one_success',
      'all_skipped',
      'one_done',
      'none_failed',
      'none_failed_min_one_success',
      'none_skipped',
      'always',
    ]) {
      const r = expectOk(
        compileText(
          `tasks:\n  - task_id: a\n    command: echo a\n  - task_id: b\n    depends_on: [a]\n    trigger_rule: ${rule}\n    command: echo b\n`,
        ),
      );
      expect(r.spec.tasks[1]!.trigger_rule).toBe(rule);
    }
  });
});
