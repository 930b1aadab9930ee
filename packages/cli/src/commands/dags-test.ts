import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import {
  formatDiagnostic,
  isLeoflowError,
  jsonNestingDepth,
  MAX_JSON_DEPTH,
  type DagSpec,
} from '@leoflow/core';
import { CliError } from '../client.js';
import { parseOutput } from '../output.js';
import { standaloneConfig } from './standalone.js';

interface DagsTestFlags {
  conf?: string;
  logicalDate?: string;
  vaultSeed?: string;
  dataDir?: string;
}

/** `--conf`: a JSON object, or a usage error (exit 2) before anything starts. */
export function parseConf(text: string): Record<string, unknown> {
  if (jsonNestingDepth(text) > MAX_JSON_DEPTH) {
    throw new CliError(
      `--conf nests objects/arrays more than ${MAX_JSON_DEPTH} deep`,
      2,
      'LF_JSON_TOO_DEEP',
    );
  }
  let conf: unknown;
  try {
    conf = JSON.parse(text);
  } catch {
    conf = undefined;
  }
  if (typeof conf !== 'object' || conf === null || Array.isArray(conf)) {
    throw new CliError(
      `--conf must be a JSON object, e.g. --conf '{"day":"2026-01-01"}'`,
      2,
      'LF_RUN_BAD_CONF',
    );
  }
  return conf as Record<string, unknown>;
}

/** `--logical-date`: an ISO 8601 date or date-time (a bare date is midnight UTC). */
export function parseLogicalDate(text: string): number {
  const ms = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(text)
    ? Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(text) ? `${text}T00:00:00Z` : text)
    : NaN;
  if (!Number.isFinite(ms)) {
    throw new CliError(
      `--logical-date must be an ISO 8601 date or date-time, e.g. 2026-01-01 or 2026-01-01T06:00:00Z (got "${text}")`,
      2,
      'LF_USAGE',
    );
  }
  return ms;
}

/** A DAG folder, or the DAG file in it. */
function dagFolderOf(target: string): string {
  try {
    return statSync(target).isDirectory() ? target : dirname(target);
  } catch {
    throw new CliError(
      `${resolve(target)} does not exist; pass a DAG folder or its leoflow.yaml`,
      2,
      'LF_DAG_FILE_NOT_FOUND',
    );
  }
}

export function registerDagsTest(
  dags: Command,
  compileOrFail: (
    dir: string,
    format: 'json' | 'table' | 'yaml',
  ) => { spec: DagSpec; file: string },
): void {
  dags
    .command('test <dag>')
    .description(
      'run the DAG once, here and now, against a throwaway store: real agents, sandbox and credential plane; exit 1 when the run fails',
    )
    .option('--conf <json>', 'run configuration (a JSON object), overlaid on the DAG params')
    .option('--logical-date <date>', 'the run’s logical date (ISO 8601; default now)')
    .option(
      '--vault-seed <folder>',
      'Variables and Connections for the test: connections.json / variables.json (Airflow export format)',
    )
    .option(
      '--data-dir <dir>',
      "use a stopped Lite's vault, keys and grants (from a copy; the original is not written)",
    )
    .addHelpText(
      'after',
      '\n<dag> is a DAG folder or its leoflow.yaml. Each task’s log is printed as it runs (to\n' +
        'stderr with -o json, whose stdout is one JSON document: run_id, state, task_instances).\n' +
        'Nothing is registered anywhere: the store, keys and work directories are removed after.',
    )
    .action(async (target: string, flags: DagsTestFlags, cmd: Command) => {
      const raw = cmd.optsWithGlobals<{ output?: string }>();
      const format = parseOutput(
        cmd.getOptionValueSourceWithGlobals('output') === 'cli' ? raw.output : undefined,
      );
      // Every usage problem before anything starts.
      if (flags.vaultSeed !== undefined && flags.dataDir !== undefined) {
        throw new CliError(
          'give --vault-seed or --data-dir, not both (one vault per test)',
          2,
          'LF_USAGE',
        );
      }
      const conf = flags.conf !== undefined ? parseConf(flags.conf) : undefined;
      const logicalDate =
        flags.logicalDate !== undefined ? parseLogicalDate(flags.logicalDate) : undefined;
      for (const [flag, dir] of [
        ['--vault-seed', flags.vaultSeed],
        ['--data-dir', flags.dataDir],
      ] as const) {
        if (dir === undefined) continue;
        let ok = false;
        try {
          ok = statSync(dir).isDirectory();
        } catch {
          ok = false;
        }
        if (!ok) throw new CliError(`${flag} ${resolve(dir)} is not a folder`, 2, 'LF_USAGE');
      }
      const { spec, file } = compileOrFail(dagFolderOf(target), format);
      const baseConfig = await standaloneConfig({});
      const { runDagTest, DagTestRefused } = await import('@leoflow/server');
      const logOut = format === 'table' ? process.stdout : process.stderr;
      // Ctrl-C stops the run's attempts and removes the temporary store; a second one exits.
      const interrupt = new AbortController();
      const onSigint = () => {
        if (interrupt.signal.aborted) process.exit(130);
        process.stderr.write('interrupted: stopping the test run (press again to force)\n');
        interrupt.abort();
      };
      process.on('SIGINT', onSigint);
      let result;
      try {
        result = await runDagTest({
          spec,
          file,
          baseConfig,
          ...(conf ? { conf } : {}),
          ...(logicalDate !== undefined ? { logicalDate } : {}),
          ...(flags.vaultSeed ? { vaultSeedDir: flags.vaultSeed } : {}),
          ...(flags.dataDir ? { sourceDataDir: flags.dataDir } : {}),
          signal: interrupt.signal,
          onLog: (l) => {
            const who = `${l.task_id}${l.map_index >= 0 ? `[${l.map_index}]` : ''}`;
            const tryNote = l.try_number > 1 ? ` try ${l.try_number}` : '';
            logOut.write(`[${who}${tryNote}] ${l.message}\n`);
          },
        });
      } catch (err) {
        if (err instanceof DagTestRefused) {
          if (format === 'json') {
            process.stdout.write(
              `${JSON.stringify({ ok: false, errors: err.diagnostics }, null, 2)}\n`,
            );
          } else {
            for (const d of err.diagnostics)
              process.stderr.write(`${formatDiagnostic({ ...d, severity: 'error' })}\n`);
          }
          throw new CliError(err.message, 1, err.code);
        }
        if (isLeoflowError(err)) throw new CliError(err.message, 1, err.code);
        throw err;
      } finally {
        process.off('SIGINT', onSigint);
      }
      if (format === 'table') {
        process.stdout.write(`\n${result.dag_id} ${result.run_id}: ${result.state}\n`);
        for (const ti of result.task_instances) {
          const who = `${ti.task_id}${ti.map_index >= 0 ? `[${ti.map_index}]` : ''}`;
          const ret = ti.xcom_return === null ? '' : `  → ${JSON.stringify(ti.xcom_return)}`;
          process.stdout.write(
            `  ${who.padEnd(24)} ${ti.state.padEnd(16)} try ${ti.try_number}${ret}\n`,
          );
        }
      } else {
        const doc = {
          dag_id: result.dag_id,
          run_id: result.run_id,
          state: result.state,
          task_instances: result.task_instances,
        };
        process.stdout.write(
          format === 'json'
            ? `${JSON.stringify(doc, null, 2)}\n`
            : `${(await import('yaml')).stringify(doc)}`,
        );
      }
      if (result.state !== 'success') {
        throw new CliError(
          `the test run of ${result.dag_id} ended ${result.state}; the failed task's log is above`,
          1,
          'LF_DAG_TEST_FAILED',
        );
      }
    });
}
