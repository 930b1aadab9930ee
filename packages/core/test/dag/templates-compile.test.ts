import { describe, expect, it } from 'vitest';
import { validateDagSpec } from '@leoflow/core';
import { compileText, expectOk } from './helpers.js';

function errors(yaml: string, scripts: Record<string, string> = {}) {
  const r = compileText(yaml, scripts);
  if (r.ok) throw new Error('expected errors');
  return r.errors.map((e) => `${e.line}:${e.column} ${e.code} ${e.path}`);
}

describe('templates at compile time', () => {
  it('marks only tasks that hold templates (others keep their spec and hash)', () => {
    const spec = expectOk(
      compileText(`
params:
  batch: 10
variables: [api_key]
tasks:
  - task_id: plain
    command: echo '$HOME' \${#a[@]}
  - task_id: cmd
    command: echo {{ ds }} {{ params.batch }} {{ var.value.api_key }}
  - task_id: env_only
    type: python
    command: print("{{ not rendered in python source }}")
    env:
      DAY: "{{ ds_nodash }}"
`),
    ).spec;
    expect(spec.tasks.map((t) => t.templated)).toEqual([undefined, true, true]);
    expect('templated' in spec.tasks[0]!).toBe(false);
  });

  it('points at the line and column of an undefined name in a plain scalar', () => {
    expect(
      errors(`tasks:
  - task_id: a
    command: echo {{ ds }} {{ dss }}
`),
    ).toEqual(['3:31 LF_TEMPLATE_UNDEFINED tasks[0].command']);
  });

  it('points inside a block scalar and at env values', () => {
    expect(
      errors(`params: {n: 1}
tasks:
  - task_id: a
    command: |
      set -e
      echo {{ params.m }}
    env:
      X: "{{ var.value.secret }}"
`),
    ).toEqual([
      '6:15 LF_TEMPLATE_UNDEFINED tasks[0].command',
      '8:14 LF_TEMPLATE_NOT_DECLARED tasks[0].env.X',
    ]);
  });

  it('refuses code and statements with a hint naming the escape', () => {
    const r = compileText(`tasks:
  - task_id: a
    command: docker inspect -f '{{.State.Running}}' c
`);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors[0]!.code).toBe('LF_TEMPLATE_SYNTAX');
    expect(r.errors[0]!.hint).toContain('{% raw %}');
    expect(
      errors(`tasks:
  - task_id: a
    command: "{% for x in y %}{{ x }}{% endfor %}"
`),
    ).toEqual(['3:15 LF_TEMPLATE_UNSUPPORTED tasks[0].command']);
  });

  it('compiles the escapes', () => {
    const spec = expectOk(
      compileText(`tasks:
  - task_id: a
    command: docker inspect -f '{{ '{{' }}.State.Running}}' c
  - task_id: b
    command: "{% raw %}awk '{{print}}'{% endraw %}"
`),
    ).spec;
    expect(spec.tasks.map((t) => t.templated)).toEqual([true, true]);
  });

  it('checks a bash script file, naming its line', () => {
    const r = compileText(
      `tasks:
  - task_id: a
    script: run.sh
`,
      { 'run.sh': '#!/bin/bash\necho {{ execution_date }}\n' },
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors[0]!.code).toBe('LF_TEMPLATE_UNSUPPORTED');
    expect(r.errors[0]!.message).toContain('run.sh:2:9');
    expect(r.errors[0]!.hint).toContain('logical_date');
  });

  it('a task-level declaration replaces the DAG list for templates too', () => {
    expect(
      errors(`variables: [a]
tasks:
  - task_id: t
    variables: [b]
    command: echo {{ var.value.a }}
`),
    ).toEqual(['5:22 LF_TEMPLATE_NOT_DECLARED tasks[0].command']);
  });

  it('a dag.json from elsewhere (validateDagSpec) gets the same template checks, by path', () => {
    const spec = expectOk(
      compileText(`variables: [k]
tasks:
  - task_id: a
    command: echo {{ ds }} {{ var.value.k }}
    env:
      X: "{{ run_id }}"
`),
    ).spec;
    expect(validateDagSpec(spec)).toMatchObject({ ok: true });
    const bad = structuredClone(spec);
    bad.tasks[0]!.command = 'echo {{ dss }}';
    bad.tasks[0]!.env = { X: '{{ var.value.other }}' };
    const r = validateDagSpec(bad);
    expect(r.ok ? [] : r.errors.map((e) => `${e.code} ${e.path}`)).toEqual([
      'LF_TEMPLATE_UNDEFINED tasks[0].command',
      'LF_TEMPLATE_NOT_DECLARED tasks[0].env.X',
    ]);
    // unmarked: the same text is a literal, as in a version stored before templates existed
    delete bad.tasks[0]!.templated;
    expect(validateDagSpec(bad)).toMatchObject({ ok: true });
  });
});
