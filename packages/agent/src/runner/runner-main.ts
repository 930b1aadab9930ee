import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DEFAULT_ATTEMPT_NPROC_LIMIT,
  DEFAULT_ATTEMPT_UID_RANGE,
  parseIsolationMode,
  parseNetworkMode,
  parseTmpfsSize,
  parseUidRange,
  parseWritablePaths,
} from '@leoflow/core';
import { closeInheritedFds } from '../sandbox/fds.js';
import { procfs, UidAllocator } from '../attempt-uid.js';
import { sandboxSettingsFromEnv, TaskLauncher } from '../sandbox/launcher.js';
import type { AgentConfig } from '../config.js';
import { stderrDiagnostics } from '../diag.js';
import { DoorUrlError, parseDoorUrl } from './door-url.js';
import { RUNNER_EXIT, RunnerDaemon } from './runner-daemon.js';
import {
  doorTransport,
  socketTransport,
  stdioTransport,
  type RunnerTransport,
} from './transport.js';

/** The daemon's flags; `--url-stdin`, `--url-file` or `--stdio` makes the bundle a runner. */
const MODE_FLAGS = ['--url-stdin', '--url-file', '--stdio', '--host-socket'];
/** What the daemon passes on to tasks from its own environment (LEOFLOW_* never). */
const INHERITED_ENV = ['PATH', 'LANG', 'LC_ALL', 'TZ'];

export const RUNNER_USAGE = `usage: leoflow-runner (--url-stdin | --url-file <file> | --stdio | --host-socket <path>) [--work-dir <dir>] [--max-attempts <n>] [--attempt-uid-range <first-last>|off]
                     [--isolation auto|required|fallback] [--network host|none] [--writable-path <dir>]... [--tmpfs-size <size>]
  --url-stdin          read the door URL (https://<door>/runners/<token>/) from the first line of stdin
  --url-file <file>    read it from a file (keep it mode 0600)
  --stdio              speak the runner protocol over stdin/stdout (an ssh runner; no URL)
  --host-socket <path> Lite's host agent: the control plane's unix socket (it starts the agent so)
  --isolation, --network, --writable-path, --tmpfs-size: the attempt sandbox, as execution.* on Lite (docs/security.md)
The URL carries the runner's token: it is never accepted in argv, which every user of the machine can read.`;

/** `leoflow runner start` and the `leoflow-runner` launcher put it first. */
export const RUNNER_MODE_FLAG = '--runner';

export function isRunnerInvocation(argv: readonly string[]): boolean {
  return (
    argv[0] === RUNNER_MODE_FLAG ||
    argv.some((a) => MODE_FLAGS.includes(a) || a.startsWith('--url'))
  );
}

interface RunnerArgs {
  transport: 'stdin' | 'file' | 'stdio' | 'socket';
  file?: string;
  socket?: string;
  workDir: string;
  maxAttempts?: number;
  uidRange?: string;
  isolation?: string;
  network?: string;
  writablePaths: string[];
  tmpfsSize?: string;
}

class UsageError extends Error {}

function parseArgs(argv: readonly string[]): RunnerArgs {
  const out: Partial<RunnerArgs> & { writablePaths: string[] } = { writablePaths: [] };
  for (let i = argv[0] === RUNNER_MODE_FLAG ? 1 : 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new UsageError(`${a} needs a value`);
      return v;
    };
    if (a === '--url-stdin') out.transport = 'stdin';
    else if (a === '--url-file') {
      out.transport = 'file';
      out.file = value();
    } else if (a === '--stdio') out.transport = 'stdio';
    else if (a === '--host-socket') {
      out.transport = 'socket';
      out.socket = value();
    } else if (a === '--work-dir') out.workDir = value();
    else if (a === '--max-attempts') {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 1)
        throw new UsageError('--max-attempts must be a positive integer');
      out.maxAttempts = n;
    } else if (a === '--attempt-uid-range') out.uidRange = value();
    else if (a === '--isolation') out.isolation = value();
    else if (a === '--network') out.network = value();
    else if (a === '--writable-path') out.writablePaths.push(value());
    else if (a === '--tmpfs-size') out.tmpfsSize = value();
    else if (a === '--url' || a.startsWith('--url=')) {
      throw new UsageError(
        '--url would put the runner token in argv, which ps shows to every user: pipe it in with --url-stdin (the registration prints that command) or use --url-file',
      );
    } else
      throw new UsageError(
        `${a.startsWith('-') ? `unknown option '${a.split('=')[0]}'` : 'unexpected argument (a positional value)'}`,
      );
  }
  if (!out.transport) throw new UsageError('give one of --url-stdin, --url-file <file>, --stdio');
  return {
    ...out,
    transport: out.transport,
    workDir: out.workDir ?? join(tmpdir(), `leoflow-runner-${process.getuid?.() ?? 'u'}`),
  };
}

async function readFirstLine(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) {
    text += String(chunk);
    const nl = text.indexOf('\n');
    if (nl >= 0) return text.slice(0, nl);
    if (text.length > 4096) break;
  }
  return text;
}

/** `leoflow-runner …`: the runner daemon, in the agent's bundle. */
export async function runnerMain(argv: readonly string[]): Promise<number> {
  const diag = stderrDiagnostics();
  let args: RunnerArgs;
  let transport: RunnerTransport;
  let attemptUids: AgentConfig['attemptUids'];
  let launcher: TaskLauncher;
  // Descriptors whatever started the daemon left open never reach a task.
  closeInheritedFds();
  try {
    args = parseArgs(argv);
    if (args.transport === 'stdio') {
      transport = stdioTransport();
    } else if (args.transport === 'socket') {
      transport = socketTransport(args.socket!);
      diag.log('info', 'host agent connecting to the control plane socket');
    } else {
      const text =
        args.transport === 'file'
          ? readFileSync(args.file!, 'utf8').split('\n')[0]!
          : await readFirstLine(process.stdin);
      const url = parseDoorUrl(text);
      transport = doorTransport(url.sessionUrl);
      diag.log('info', `runner connecting through ${url.redacted}`);
    }
    // Root: each attempt runs under a uid of its own (the same allocator as on Lite).
    const range =
      args.uidRange ?? process.env['LEOFLOW_ATTEMPT_UID_RANGE'] ?? DEFAULT_ATTEMPT_UID_RANGE;
    if (process.getuid?.() === 0 && range !== 'off') {
      const nproc = process.env['LEOFLOW_ATTEMPT_NPROC_LIMIT'];
      attemptUids = {
        range: parseUidRange(range, '--attempt-uid-range'),
        nproc: nproc && /^\d+$/.test(nproc) ? Number(nproc) : DEFAULT_ATTEMPT_NPROC_LIMIT,
        lockDir: process.env['LEOFLOW_ATTEMPT_UID_LOCK_DIR'] || undefined,
      };
    }
    // The same sandbox as Lite's (docs/security.md): flags over LEOFLOW_SANDBOX_* env.
    const fromEnv = sandboxSettingsFromEnv(process.env);
    launcher = TaskLauncher.create({
      ...fromEnv,
      ...(args.isolation ? { isolation: parseIsolationMode(args.isolation, '--isolation') } : {}),
      ...(args.network ? { network: parseNetworkMode(args.network, '--network') } : {}),
      ...(args.tmpfsSize ? { tmpfsSizeBytes: parseTmpfsSize(args.tmpfsSize, '--tmpfs-size') } : {}),
      writablePaths: [
        ...fromEnv.writablePaths,
        ...parseWritablePaths(args.writablePaths, '--writable-path'),
      ],
      // the runner's credential file is never in a task's view
      masks: [...fromEnv.masks, ...(args.file ? [args.file] : [])],
    });
    diag.log(
      'info',
      `attempt sandbox: ${launcher.posture.mode}${launcher.posture.why ? ` (${launcher.posture.why})` : ''}`,
    );
  } catch (err) {
    const known = err instanceof UsageError || err instanceof DoorUrlError;
    process.stderr.write(
      `leoflow-runner: ${err instanceof Error ? err.message : String(err)}\n${known && err instanceof UsageError ? `${RUNNER_USAGE}\n` : ''}`,
    );
    return RUNNER_EXIT.USAGE;
  }
  // One allocation hint per runner installation (its work dir), never shared with Lite's.
  const instance = `runner-${createHash('sha256').update(args.workDir).digest('hex').slice(0, 12)}`;
  const agentEnv: Record<string, string> = {};
  for (const name of INHERITED_ENV) {
    const v = process.env[name];
    if (v !== undefined) agentEnv[name] = v;
  }
  // Lite's host agent hands node and python tasks the SDK copies under its work root (as the
  // executor did).
  const nodeModules = process.env['LEOFLOW_NODE_MODULES'] || undefined;
  const pythonSdk = process.env['LEOFLOW_PYTHON_SDK'] || undefined;
  const daemon = new RunnerDaemon({
    transport,
    workRoot: args.workDir,
    agentEnv,
    ...(nodeModules ? { nodeModules } : {}),
    ...(pythonSdk ? { pythonSdk } : {}),
    attemptUids,
    launcher,
    instance,
    diag,
    ...(args.maxAttempts !== undefined ? { maxAttempts: args.maxAttempts } : {}),
  });
  if (args.transport === 'socket' && attemptUids) {
    // A predecessor that died (kill -9) left its tasks' uids held: their processes are killed
    // now, before this agent connects, so the control plane can end and retry those attempts
    // without two of one task ever running at once (docs/run-loop.md, "The host agent").
    const allocator = new UidAllocator({
      range: attemptUids.range,
      ...(attemptUids.lockDir ? { lockDir: attemptUids.lockDir } : {}),
      instance,
      procs: procfs,
      cleanup: (uid) => launcher.scrubUid(uid),
    });
    const reclaimed = await allocator.reclaimStale();
    if (reclaimed.length > 0)
      diag.log(
        'warn',
        `reclaimed ${reclaimed.length} uid(s) a dead agent held: ${reclaimed.join(', ')}`,
      );
  }
  for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(s, () => daemon.stop());
  const crash = (err: unknown): void => {
    diag.log(
      'error',
      `runner crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
    );
    daemon.killNow();
    process.exit(1);
  };
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);
  return daemon.run();
}
