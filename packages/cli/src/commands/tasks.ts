import type { Command } from 'commander';
import { ApiClient, CliError } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';
import { resolveRun, runPath } from '../run-resolver.js';

interface LogPage {
  try_number: number;
  lines: { line_number: number; time: string; stream: string; message: string }[];
  next_after_line: number;
  attempt_finished: boolean;
}

/**
 * Control characters (C0 but tab and newline, DEL, C1) as visible escapes (`\x1b`, `\u009b`):
 * what a terminal shows of a task's log without obeying it.
 */
export function visibleControls(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => {
    const n = c.charCodeAt(0);
    return n < 0x80
      ? `\\x${n.toString(16).padStart(2, '0')}`
      : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

export function registerTasks(program: Command): void {
  const tasks = program
    .command('tasks')
    .description('task instances: logs, mark success/failed and clear-and-rerun');

  tasks
    .command('logs <run_id> <task_id>')
    .description("an attempt's log (stdout, stderr and agent lines)")
    .option(
      '--dag <dag_id>',
      'the DAG, when several DAGs have a run with this id (required with `latest`, the newest run)',
    )
    .option('--try <n>', 'which try (default: the latest)')
    .option('--map-index <n>', 'which map index of a mapped task')
    .option('-f, --follow', 'keep printing new lines until the attempt finishes')
    .option(
      '--raw',
      "write the task's bytes as they are, even to a terminal (by default a terminal gets control characters as visible escapes)",
    )
    .action(
      async (
        runId: string,
        taskId: string,
        flags: { dag?: string; try?: string; mapIndex?: string; follow?: boolean; raw?: boolean },
        cmd: Command,
      ) => {
        const g = globalOpts(cmd);
        const format = parseOutput(g.output);
        const client = new ApiClient(g);
        const ref = await resolveRun(client, runId, flags.dag);
        const base = `${runPath(ref)}/tasks/${encodeURIComponent(taskId)}/logs`;
        let after = 0;
        let tryNumber = flags.try;
        const all: LogPage['lines'] = [];
        // A task's output is the task's: on a terminal, escape sequences in it (OSC 8 links,
        // OSC 52 clipboard writes, cursor moves) would act on the operator's terminal.
        const show = process.stdout.isTTY && !flags.raw ? visibleControls : (s: string) => s;
        for (;;) {
          const q = new URLSearchParams({ after_line: String(after), limit: '5000' });
          if (tryNumber) q.set('try', tryNumber);
          if (flags.mapIndex !== undefined) q.set('map_index', mapIndexArg(flags.mapIndex));
          const page = await client.request<LogPage>('GET', `${base}?${q.toString()}`);
          tryNumber ??= String(page.try_number);
          for (const l of page.lines) {
            if (format === 'table') {
              const tag = l.stream === 'stdout' ? '' : `[${l.stream}] `;
              process.stdout.write(`${l.time} ${tag}${show(l.message)}\n`);
            } else all.push(l);
          }
          after = page.next_after_line;
          if (page.lines.length === 5000) continue;
          if (!flags.follow || page.attempt_finished) break;
          await new Promise((r) => setTimeout(r, 500));
        }
        if (format !== 'table') print(format, { try_number: Number(tryNumber), lines: all });
      },
    );

  tasks
    .command('revoke-credential <run_id> <task_id>')
    .description(
      "stop an attempt's credential from resolving secrets and renewing, now, whatever its state (a live task keeps running unless --terminate); says what changed",
    )
    .option(
      '--dag <dag_id>',
      'the DAG, when several DAGs have a run with this id (required with `latest`, the newest run)',
    )
    .option('--try <n>', 'which try (default: the current one)')
    .option('--map-index <n>', 'which map index of a mapped task')
    .option('--terminate', 'also stop the attempt')
    .action(
      async (
        runId: string,
        taskId: string,
        flags: { dag?: string; try?: string; mapIndex?: string; terminate?: boolean },
        cmd: Command,
      ) => {
        const g = globalOpts(cmd);
        const client = new ApiClient(g);
        const ref = await resolveRun(client, runId, flags.dag);
        const res = await client.request<{
          try_number: number;
          attempt_state: string;
          revoked_now: boolean;
          credential_expires_at: string | null;
          tokens_still_valid: boolean;
          changes: string[];
          terminated: boolean;
        }>('POST', `${runPath(ref)}/tasks/${encodeURIComponent(taskId)}/revoke-credential`, {
          ...(flags.try ? { try: Number(flags.try) } : {}),
          ...(flags.mapIndex !== undefined
            ? { map_index: Number(mapIndexArg(flags.mapIndex)) }
            : {}),
          terminate: flags.terminate ?? false,
        });
        const format = parseOutput(g.output);
        if (format === 'table') {
          const head = res.revoked_now
            ? `revoked the credential of ${taskId} try ${res.try_number} (${res.attempt_state})`
            : `the credential of ${taskId} try ${res.try_number} (${res.attempt_state}) was already revoked`;
          const valid = res.tokens_still_valid
            ? `a token of it still verified, until ${res.credential_expires_at ?? 'its expiry'}`
            : 'no token of it verified any more';
          process.stdout.write(`${head}; ${valid}\n${res.changes.map((c) => `  ${c}\n`).join('')}`);
        } else print(format, res);
      },
    );

  tasks
    .command('delivery <run_id> <task_id>')
    .description(
      'per attempt: scoping and liveness modes, secret names delivered (never values), refusals, renewals, credential expiry',
    )
    .option(
      '--dag <dag_id>',
      'the DAG, when several DAGs have a run with this id (required with `latest`, the newest run)',
    )
    .option('--try <n>', 'only this try (default: every try)')
    .option('--map-index <n>', 'which map index of a mapped task')
    .action(
      async (
        runId: string,
        taskId: string,
        flags: { dag?: string; try?: string; mapIndex?: string },
        cmd: Command,
      ) => {
        const g = globalOpts(cmd);
        const client = new ApiClient(g);
        const ref = await resolveRun(client, runId, flags.dag);
        const params = new URLSearchParams();
        if (flags.try) params.set('try', flags.try);
        if (flags.mapIndex !== undefined) params.set('map_index', mapIndexArg(flags.mapIndex));
        const q = params.size > 0 ? `?${params.toString()}` : '';
        const res = await client.request<{
          attempts: Record<string, unknown>[];
        }>('GET', `${runPath(ref)}/tasks/${encodeURIComponent(taskId)}/delivery${q}`);
        const rows = res.attempts.map((a) => ({
          ...a,
          try: a.try_number,
          modes: `${typeof a.scoping_mode === 'string' ? a.scoping_mode : '-'}/${typeof a.liveness_mode === 'string' ? a.liveness_mode : '-'}`,
          variables: refusedOr(a.variables_delivered, a.variables_refusal),
          connections: refusedOr(a.connections_delivered, a.connections_refusal),
          expires: a.credential_expires_at,
          stopped: a.renewal_stopped,
        }));
        print(parseOutput(g.output), res, {
          rows,
          columns: ['try', 'modes', 'variables', 'connections', 'renewals', 'stopped', 'expires'],
        });
      },
    );

  tasks
    .command('mapped <run_id> <task_id>')
    .description(
      "a mapped task's task instances: one per map index, with its state, try and arguments",
    )
    .option(
      '--dag <dag_id>',
      'the DAG, when several DAGs have a run with this id (required with `latest`, the newest run)',
    )
    .action(async (runId: string, taskId: string, flags: { dag?: string }, cmd: Command) => {
      const g = globalOpts(cmd);
      const client = new ApiClient(g);
      const ref = await resolveRun(client, runId, flags.dag);
      const res = await client.request<{
        task_id: string;
        task_instances: {
          map_index: number;
          state: string;
          try_number: number;
          map_value: Record<string, string> | null;
        }[];
      }>('GET', `${runPath(ref)}/tasks/${encodeURIComponent(taskId)}/mapped`);
      print(parseOutput(g.output), res, {
        rows: res.task_instances.map((t) => ({
          ...t,
          arguments: Object.entries(t.map_value ?? {})
            .map(([k, v]) => `${k}=${v}`)
            .join(' '),
        })),
        columns: ['map_index', 'state', 'try_number', 'arguments'],
      });
    });

  tasks
    .command('mark <run_id> <task_ids...>')
    .description(
      "mark task instances success or failed (a live attempt is stopped and its credential revoked); <run_id> may be 'latest' with --dag",
    )
    .option(
      '--dag <dag_id>',
      "the DAG (needed with 'latest', or when several DAGs have the run id)",
    )
    .option('--state <state>', 'success or failed')
    .option('--downstream', 'also mark every task downstream of the given ones')
    .option('--upstream', 'also mark every task upstream of the given ones')
    .action(
      async (
        runId: string,
        taskIds: string[],
        flags: { dag?: string; state?: string; downstream?: boolean; upstream?: boolean },
        cmd: Command,
      ) => markAction(cmd, runId, taskIds, flags),
    );

  tasks
    .command('clear <run_id> [task_ids...]')
    .description(
      'clear-and-rerun: new tries for the given tasks (default: the whole run), bound to the current DAG version',
    )
    .option(
      '--dag <dag_id>',
      'the DAG, when several DAGs have a run with this id (required with `latest`, the newest run)',
    )
    .option('--no-downstream', 'do not also clear the tasks downstream of the given ones')
    .action(
      async (
        runId: string,
        taskIds: string[],
        flags: { dag?: string; downstream: boolean },
        cmd: Command,
      ) => {
        const g = globalOpts(cmd);
        const client = new ApiClient(g);
        const ref = await resolveRun(client, runId, flags.dag);
        const res = await client.request<{ run: Record<string, unknown>; cleared: string[] }>(
          'POST',
          `${runPath(ref)}/clear`,
          {
            ...(taskIds.length > 0 ? { task_ids: taskIds } : {}),
            downstream: flags.downstream,
          },
        );
        const format = parseOutput(g.output);
        if (format === 'table') {
          process.stdout.write(
            res.cleared.length > 0
              ? `cleared ${res.cleared.join(', ')}; run ${ref.run_id} is queued again\n`
              : 'nothing to clear\n',
          );
        } else print(format, res);
      },
    );
}

/** A map index as given on the command line: a whole number ≥ 0 (or -1, "not mapped"). */
function mapIndexArg(v: string): string {
  if (!/^(-1|0|[1-9][0-9]*)$/.test(v)) {
    throw new CliError(`--map-index must be a whole number ≥ 0, got "${v}"`, 2, 'LF_USAGE');
  }
  return v;
}

function refusedOr(delivered: unknown, refusal: unknown): string {
  const names = Array.isArray(delivered) ? (delivered as string[]).join(',') || '(none)' : '-';
  return typeof refusal === 'string' && refusal !== '' ? `${names} [refused: ${refusal}]` : names;
}

/** `tasks mark` and `runs mark`: one request, one answer (docs/cli.md). */
export async function markAction(
  cmd: Command,
  runId: string,
  taskIds: string[] | null,
  flags: { dag?: string; state?: string; downstream?: boolean; upstream?: boolean },
): Promise<void> {
  const g = globalOpts(cmd);
  const format = parseOutput(g.output);
  if (flags.state !== 'success' && flags.state !== 'failed') {
    throw new CliError(
      `--state must be success or failed, got "${flags.state ?? ''}"`,
      2,
      'LF_MARK_BAD_STATE',
    );
  }
  const client = new ApiClient(g);
  const ref = await resolveRun(client, runId, flags.dag);
  const res = await client.request<{ run: { state: string }; marked: string[] }>(
    'POST',
    `${runPath(ref)}/mark`,
    {
      state: flags.state,
      ...(taskIds !== null
        ? {
            task_ids: taskIds,
            downstream: flags.downstream ?? false,
            upstream: flags.upstream ?? false,
          }
        : {}),
    },
  );
  if (format === 'table') {
    process.stdout.write(
      res.marked.length > 0
        ? `marked ${res.marked.join(', ')} ${flags.state}; run ${ref.run_id} is ${res.run.state}\n`
        : `nothing to mark: already ${flags.state}; run ${ref.run_id} is ${res.run.state}\n`,
    );
  } else print(format, { dag_id: ref.dag_id, run_id: ref.run_id, ...res });
}
