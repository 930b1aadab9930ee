import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bashScript, fishScript, zshScript } from '../src/commands/completion.js';
import { buildProgram } from '../src/program.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'leoflow-completion-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function has(shell: string): boolean {
  return spawnSync(shell, ['-c', 'exit 0']).status === 0;
}

function run(shell: string, args: string[], script: string): string {
  const res = spawnSync(shell, [...args, script], { encoding: 'utf8', timeout: 10_000 });
  expect(res.stderr).toBe('');
  expect(res.status).toBe(0);
  return res.stdout;
}

/** Shell-quotes words for a bash array. */
const words = (line: string[]) => line.map((w) => `'${w}'`).join(' ');

describe('leoflow completion bash', () => {
  const cases: [string[], string[]][] = [
    [['leoflow', 'runs', 'tr'], ['trigger']],
    [
      ['leoflow', ''],
      ['standalone', 'dags', 'runs', 'config', 'completion'],
    ],
    [['leoflow', 'config', 'u'], ['use-profile']],
    [['leoflow', '--url', 'http://x', '--profile', 'runs', 'dags', 'l'], ['list']],
    [['leoflow', '-o', 'js'], ['json']],
    [
      ['leoflow', 'runs', 'list', '--output', ''],
      ['table', 'json', 'yaml'],
    ],
    [['leoflow', 'runs', 'trigger', '--c'], ['--conf']],
    [['leoflow', 'runs', 'trigger', 'hello', '--pro'], ['--profile']],
    [
      ['leoflow', 'completion', ''],
      ['bash', 'zsh', 'fish'],
    ],
  ];

  it('is valid bash (bash -n) and completes sub-commands, options and -o values', () => {
    const file = join(dir, 'leoflow.bash');
    writeFileSync(file, bashScript(buildProgram()));
    run('bash', ['-n'], file);
    const driver = join(dir, 'driver.bash');
    writeFileSync(
      driver,
      [
        `source '${file}'`,
        ...cases.map(([line]) =>
          [
            `COMP_WORDS=(${words(line)})`,
            `COMP_CWORD=${line.length - 1}`,
            'COMPREPLY=()',
            '_leoflow',
            `echo "\${COMPREPLY[*]}"`,
          ].join('; '),
        ),
      ].join('\n'),
    );
    const out = run('bash', ['--norc', '--noprofile'], driver).split('\n');
    cases.forEach(([line, expected], i) => {
      const got = (out[i] ?? '').split(' ');
      for (const e of expected) expect(got, line.join(' ')).toContain(e);
    });
    expect(out[0]).toBe('trigger');
  });
});

describe.skipIf(!has('zsh'))('leoflow completion zsh', () => {
  it('is valid zsh and offers the sub-commands of the path it is at', () => {
    const file = join(dir, '_leoflow');
    writeFileSync(file, zshScript(buildProgram()));
    run('zsh', ['-n'], file);
    // Outside a completion widget: stand-ins for compdef/compadd/_describe print candidates.
    const driver = join(dir, 'driver.zsh');
    writeFileSync(
      driver,
      [
        'compdef() { : }',
        `source '${file}'`,
        'compadd() { print -r -- "${(j: :)${(P)2}}" }',
        '_describe() { print -r -- "${(j: :)${(@)${(P)4}%%:*}}" }',
        "_files() { print -r -- '<files>' }",
        'words=(leoflow runs tr); CURRENT=3; _leoflow',
        "words=(leoflow -o ''); CURRENT=3; _leoflow",
      ].join('\n'),
    );
    const [subs, formats] = run('zsh', ['-f'], driver).split('\n');
    expect(subs?.split(' ')).toContain('trigger');
    expect(subs?.split(' ')).not.toContain('dags');
    expect(formats).toBe('table json yaml');
  });
});

describe.skipIf(!has('fish'))('leoflow completion fish', () => {
  it('is valid fish and completes sub-commands', () => {
    const file = join(dir, 'leoflow.fish');
    writeFileSync(file, fishScript(buildProgram()));
    run('fish', ['--no-execute'], file);
    const res = spawnSync(
      'fish',
      [
        '--no-config',
        '-c',
        `source '${file}'; complete -C'leoflow runs tr'; complete -C'leoflow -o '`,
      ],
      { encoding: 'utf8', timeout: 10_000 },
    );
    expect(res.status).toBe(0);
    expect(res.stdout).toMatch(/^trigger\t/m);
    expect(res.stdout).toMatch(/^yaml\t/m);
  });
});
