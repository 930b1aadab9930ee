import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { defaultServerConfig } from '@leoflow/server';
import { CliError } from '../client.js';

/** Makes the agent bundle the runner daemon whatever else is (or is not) on the line. */
const RUNNER_MODE_FLAG = '--runner';

/**
 * `leoflow runner start …`: runs the runner daemon (the agent bundle with runner flags) with
 * this process's stdin, so the printed launch command works with it too:
 * `printf '%s\n' '<door>/runners/<token>/' | leoflow runner start --url-stdin`.
 */
export function registerRunner(program: Command): void {
  program
    .command('runner')
    .description('this machine as a runner (docs/runners.md)')
    .command('start')
    .description(
      'run the runner daemon: --url-stdin | --url-file <file> | --stdio, [--work-dir <dir>] [--max-attempts <n>] (the URL, which holds the token, is never accepted in argv)',
    )
    .allowUnknownOption(true)
    .allowExcessArguments(true)
    .helpOption(false)
    .action(async () => {
      // Everything after `runner start`, untouched: these are the daemon's flags, not ours.
      const at = process.argv.findIndex(
        (a, i) => a === 'start' && process.argv[i - 1] === 'runner',
      );
      const args = at < 0 ? [] : process.argv.slice(at + 1);
      const bundle = defaultServerConfig('.').subprocess.agentEntry;
      if (!existsSync(bundle)) {
        throw new CliError(
          `the runner bundle ${bundle} is missing; run \`npm run build\``,
          1,
          'LF_RUNNER_BUNDLE_MISSING',
        );
      }
      const child = spawn(process.execPath, [bundle, RUNNER_MODE_FLAG, ...args], {
        stdio: 'inherit',
      });
      for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
        process.on(s, () => child.kill(s));
      }
      const code = await new Promise<number>((resolve) =>
        child.once('exit', (c, sig) => resolve(c ?? (sig ? 128 : 1))),
      );
      process.exitCode = code;
    });
}
