import type { Command } from 'commander';
import { jsonNestingDepth, MAX_JSON_DEPTH } from '@leoflow/core';
import { ApiClient, CliError } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print, renderTable, type OutputFormat } from '../output.js';
import { resolveRun, runPath, type RunRef } from '../run-resolver.js';
import { markAction } from './tasks.js';

interface RunView {
  dag_id: string;
  run_id: string;
  state: string;
  [k: string]: unknown;
}
interface TaskView {
  task_id: string;
  state: string;
  try_number: number;
  [k: string]: unknown;
}
interface RunDetail {
  run: RunView;
  task_instances: TaskView[];
}

const RUN_COLUMNS = [
  'dag_id',
  'run_id',
  'state',
  'run_type',
  'logical_date',
  'started_at',
  'ended_at',
];
const TASK_COLUMNS = [
  'task_id',
  'state',
  'try_number',
  'started_at',
  'ended_at',
  'exit_code',
  'error_message',
];

export function registerRuns(program: Command): void {
  const runs = program.command('runs').description('trigger, list and inspect DAG runs');

  runs
    .command('trigger <dag_id>')
    .description('start a manual run')
    .option('--conf <json>', 'run configuration (a JSON object), overlaid on the DAG params')
    .option('--run-id <id>', 'choose the run id (default manual__<time>_<suffix>)')
    .option('--wait', 'follow the run until it finishes; exit 1 if it fails')
    .action(
      async (
        dagId: string,
        flags: { conf?: string; runId?: string; wait?: boolean },
        cmd: Command,
      ) => {
        const g = globalOpts(cmd);
        const format = parseOutput(g.output);
        let conf: unknown;
        if (flags.conf !== undefined) {
          if (jsonNestingDepth(flags.conf) > MAX_JSON_DEPTH) {
            throw new CliError(
              `--conf nests objects/arrays more than ${MAX_JSON_DEPTH} deep; the server refuses it`,
              2,
              'LF_JSON_TOO_DEEP',
            );
          }
          try {
            conf = JSON.parse(flags.conf);
          } catch {
            throw new CliError(
              `--conf must be a JSON object, e.g. --conf '{"day":"2026-01-01"}'`,
              2,
              'LF_USAGE',
            );
          }
        }
        const client = new ApiClient(g);
        const run = await client.request<RunView>(
          'POST',
          `/api/v1/dags/${encodeURIComponent(dagId)}/runs`,
          {
            ...(conf !== undefined ? { conf } : {}),
            ...(flags.runId ? { run_id: flags.runId } : {}),
          },
        );
        if (!flags.wait) {
          print(format, run, { rows: [run], columns: RUN_COLUMNS });
          return;
        }
        if (format === 'table') process.stdout.write(`triggered ${run.dag_id} ${run.run_id}\n`);
        const final = await waitForRun(client, { dag_id: run.dag_id, run_id: run.run_id }, format);
        if (format !== 'table') print(format, final);
        if (final.run.state !== 'success') process.exitCode = 1;
      },
    );

  runs
    .command('list')
    .description('list runs, newest first')
    .option('--dag <dag_id>', 'only this DAG')
    .option('--state <state>', 'queued, running, success or failed')
    .option('--limit <n>', 'at most this many', '50')
    .action(async (flags: { dag?: string; state?: string; limit: string }, cmd: Command) => {
      const g = globalOpts(cmd);
      const q = new URLSearchParams({ limit: flags.limit });
      if (flags.dag) q.set('dag_id', flags.dag);
      if (flags.state) q.set('state', flags.state);
      const res = await new ApiClient(g).request<{ runs: RunView[] }>(
        'GET',
        `/api/v1/runs?${q.toString()}`,
      );
      print(parseOutput(g.output), res, { rows: res.runs, columns: RUN_COLUMNS });
    });

  runs
    .command('mark <run_id>')
    .description(
      "mark a whole run success (every task instance success) or failed (live ones failed, unfinished ones skipped); <run_id> may be 'latest' with --dag",
    )
    .option(
      '--dag <dag_id>',
      "the DAG (needed with 'latest', or when several DAGs have the run id)",
    )
    .option('--state <state>', 'success or failed')
    .action(async (runId: string, flags: { dag?: string; state?: string }, cmd: Command) =>
      markAction(cmd, runId, null, flags),
    );

  runs
    .command('show <run_id>')
    .description('a run and its task instances')
    .option(
      '--dag <dag_id>',
      'the DAG, when several DAGs have a run with this id (required with `latest`, the newest run)',
    )
    .action(async (runId: string, flags: { dag?: string }, cmd: Command) => {
      const g = globalOpts(cmd);
      const format = parseOutput(g.output);
      const client = new ApiClient(g);
      const ref = await resolveRun(client, runId, flags.dag);
      const detail = await client.request<RunDetail>('GET', runPath(ref));
      if (format !== 'table') return print(format, detail);
      process.stdout.write(renderTable([detail.run], RUN_COLUMNS));
      process.stdout.write('\n');
      process.stdout.write(renderTable(detail.task_instances.map(waitingShown), TASK_COLUMNS));
    });
}

/** A mapped task's instance is `task[map index]` (as Airflow's UI writes it). */
function label(t: TaskView): string {
  const i = t['map_index'];
  return typeof i === 'number' && i >= 0 ? `${t.task_id}[${i}]` : t.task_id;
}

/** A queued attempt of the runner executor is waiting for a runner to take it: say so. */
function waitingShown(t: TaskView): TaskView {
  const shown = { ...t, task_id: label(t) };
  return t.state === 'queued' && t['executor'] === 'runner'
    ? { ...shown, state: 'queued (waiting for a runner)' }
    : shown;
}

const TERMINAL_RUN = new Set(['success', 'failed']);

/** Polls a run until it ends, showing per-task progress (redrawn on a TTY, one line per change otherwise). */
export async function waitForRun(
  client: ApiClient,
  ref: RunRef,
  format: OutputFormat,
): Promise<RunDetail> {
  const tty = format === 'table' && process.stdout.isTTY;
  const seen = new Map<string, string>();
  let drawn = 0;
  for (;;) {
    const detail = await client.request<RunDetail>('GET', runPath(ref));
    if (format === 'table') {
      if (tty) {
        if (drawn > 0) process.stdout.write(`\u001b[${drawn}A\u001b[J`);
        const lines = detail.task_instances.map(
          (t) =>
            `  ${symbol(t.state)} ${label(t).padEnd(24)} ${t.state}${t.try_number > 1 ? ` (try ${t.try_number})` : ''}`,
        );
        lines.push(`  run: ${detail.run.state}`);
        process.stdout.write(`${lines.join('\n')}\n`);
        drawn = lines.length;
      } else {
        for (const t of detail.task_instances) {
          const key = `${t.state}/${t.try_number}`;
          if (seen.get(label(t)) !== key) {
            seen.set(label(t), key);
            if (t.state !== 'none')
              process.stdout.write(
                `${label(t)}: ${t.state}${t.try_number > 1 ? ` (try ${t.try_number})` : ''}\n`,
              );
          }
        }
      }
    }
    if (TERMINAL_RUN.has(detail.run.state)) {
      if (format === 'table')
        process.stdout.write(`run ${detail.run.run_id}: ${detail.run.state}\n`);
      return detail;
    }
    await new Promise((r) => setTimeout(r, 400));
  }
}

function symbol(state: string): string {
  switch (state) {
    case 'success':
      return '✔';
    case 'failed':
    case 'upstream_failed':
      return '✘';
    case 'running':
      return '▶';
    case 'skipped':
      return '↷';
    default:
      return '·';
  }
}
