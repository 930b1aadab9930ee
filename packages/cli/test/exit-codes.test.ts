import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../src/program.js';
import { cli, type CliResult } from '../../../test/support/processes.js';

// Exit codes: 0 ok, 1 refused or failed, 2 usage. Every leaf of the real command tree must turn
// a usage mistake into 2 and a message on stderr, never a stack trace or a 1.

function leaves(cmd: Command, path: string[] = []): { path: string[]; cmd: Command }[] {
  if (cmd.commands.length === 0) return [{ path, cmd }];
  return cmd.commands.flatMap((c) => leaves(c, [...path, c.name()]));
}

let dir: string;
let env: Record<string, string>;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'leoflow-exit-codes-'));
  // Nothing may reach a real server, home folder or data directory.
  env = {
    LEOFLOW_CLI_CONFIG: join(dir, 'config.yaml'),
    LEOFLOW_URL: 'http://127.0.0.1:9',
    LEOFLOW_TOKEN: 'x',
    LEOFLOW_DATA_DIR: join(dir, 'data'),
  };
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the real CLI for each argument list, a few at a time. */
async function runAll(argLists: string[][]): Promise<CliResult[]> {
  const results: CliResult[] = new Array<CliResult>(argLists.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < argLists.length; i = next++)
      results[i] = await cli(argLists[i] ?? [], env, 20_000);
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return results;
}

// One real CLI process per leaf command, four at a time: the tree grows with every command, so
// these cases get more than the suite's default time.
const PER_LEAF_BUDGET_MS = 3_000;

describe('exit codes (real CLI process)', () => {
  const all = leaves(buildProgram());

  it('walks a tree with every command group', () => {
    const names = all.map((l) => l.path.join(' '));
    expect(names).toEqual(
      expect.arrayContaining(['standalone', 'runs trigger', 'config set-profile', 'completion']),
    );
    expect(all.length).toBeGreaterThan(30);
  });

  it(
    'exits 2 with a message for an unknown option on every leaf command',
    async () => {
      const results = await runAll(all.map((l) => [...l.path, '--definitely-not-an-option']));
      const wrong = all
        .map((l, i) => ({ cmd: l.path.join(' '), res: results[i] }))
        .filter(
          ({ res }) =>
            // A command with a required option reports that one first; either way it is usage.
            res?.code !== 2 ||
            !/unknown option '--definitely-not-an-option'|required option .* not specified/.test(
              res.stderr,
            ),
        )
        .map(({ cmd, res }) => `${cmd}: exit ${res?.code} ${res?.stderr.slice(0, 200)}`);
      expect(wrong).toEqual([]);
    },
    all.length * PER_LEAF_BUDGET_MS,
  );

  it(
    'exits 2 when a required argument is missing',
    async () => {
      const needing = all.filter((l) => l.cmd.registeredArguments.some((a) => a.required));
      expect(needing.length).toBeGreaterThan(10);
      const results = await runAll(needing.map((l) => l.path));
      const wrong = needing
        .map((l, i) => ({ cmd: l.path.join(' '), res: results[i] }))
        .filter(({ res }) => res?.code !== 2 || !/missing required argument/.test(res.stderr))
        .map(({ cmd, res }) => `${cmd}: exit ${res?.code} ${res?.stderr.slice(0, 200)}`);
      expect(wrong).toEqual([]);
    },
    all.length * PER_LEAF_BUDGET_MS,
  );

  it('exits 2 for unknown commands, bad choices and missing option values; 0 for help', async () => {
    const [unknown, unknownSub, badOutput, noProfileName, badShell, help] = await runAll([
      ['definitely-not-a-command'],
      ['runs', 'definitely-not-a-command'],
      ['dags', 'list', '-o', 'xml'],
      ['dags', 'list', '--profile'],
      ['completion', 'powershell'],
      ['--help'],
    ]);
    expect(unknown).toMatchObject({ code: 2 });
    expect(unknown?.stderr).toContain("unknown command 'definitely-not-a-command'");
    expect(unknownSub).toMatchObject({ code: 2 });
    expect(unknownSub?.stderr).toContain('unknown command');
    expect(badOutput?.code).toBe(2);
    expect(badOutput?.stderr).toContain('Allowed choices are table, json, yaml');
    expect(noProfileName?.code).toBe(2);
    expect(badShell?.code).toBe(2);
    expect(badShell?.stderr).toContain('bash, zsh, fish');
    expect(help?.code).toBe(0);
    expect(help?.stdout).toContain('--profile <name>');
  });
});
