import { spawn, type ChildProcess } from 'node:child_process';
import {
  accessSync,
  chownSync,
  constants as fsc,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { constants as osc } from 'node:os';
import path from 'node:path';
import { TaskType } from '@leoflow/protocol';
import type { EnvMap } from './env.js';
import { LineSplitter } from './lines.js';
import { sleep } from './retry.js';

export interface RunAs {
  uid: number;
  gid: number;
}

export interface LaunchPlan {
  file: string;
  args: string[];
  /**
   * Spawned as the agent's own user: the sandbox helper starts as root and drops to the
   * attempt's uid itself, after its namespaces and mounts (sandbox/launcher.ts).
   */
  asRoot?: boolean;
}

/** Writes a file the task (possibly another uid) can read and nobody else can. */
export function writeTaskFile(
  file: string,
  content: string | Uint8Array,
  runAs: RunAs | undefined,
): void {
  writeFileSync(file, content, { mode: 0o600 });
  if (runAs && process.getuid?.() === 0) chownSync(file, runAs.uid, runAs.gid);
}

function findOnPath(name: string, pathVar: string | undefined): string | undefined {
  for (const dir of (pathVar ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, fsc.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return undefined;
}

export class UnsupportedTaskTypeError extends Error {}

/**
 * Turns the spec into an argv. Script sources are written into the workdir rather than passed
 * via `-c`/`-e` so tracebacks point at a real file and argv stays short.
 */
export function planLaunch(
  type: TaskType,
  command: string,
  opts: {
    workdir: string;
    env: EnvMap;
    runAs: RunAs | undefined;
    python: string;
    node: string;
    nodeModules?: string | undefined;
  },
): LaunchPlan {
  switch (type) {
    case TaskType.BASH: {
      const bash = findOnPath('bash', opts.env['PATH']);
      return bash
        ? { file: bash, args: ['-c', command] }
        : { file: '/bin/sh', args: ['-c', command] };
    }
    case TaskType.PYTHON:
      writeTaskFile(path.join(opts.workdir, 'task.py'), command, opts.runAs);
      return { file: opts.python, args: ['task.py'] };
    case TaskType.NODE:
      writeTaskFile(path.join(opts.workdir, 'task.mjs'), command, opts.runAs);
      // ESM resolves bare imports by walking up from the script: a link in the workdir lets a
      // task `import '@leoflow/sdk'` (and its dependencies) from the installation.
      if (opts.nodeModules)
        symlinkSync(opts.nodeModules, path.join(opts.workdir, 'node_modules'), 'dir');
      return { file: opts.node, args: ['task.mjs'] };
    default:
      throw new UnsupportedTaskTypeError(`unsupported task type ${String(type)}`);
  }
}

export interface TaskExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** set when the process could not be started at all (ENOENT, EACCES, EPERM, …) */
  spawnError?: string;
}

/** Shell convention: 128 + signal number, 127/126 for "not found"/"not executable". */
export function exitCodeOf(exit: TaskExit): number {
  if (exit.spawnError !== undefined) return exit.spawnError === 'ENOENT' ? 127 : 126;
  if (exit.code !== null) return exit.code;
  if (exit.signal) return 128 + (osc.signals[exit.signal] ?? 0);
  return 1;
}

/** Pids in process group `pgid` that are still running (zombies count as gone). */
export function livingGroupMembers(pgid: number): number[] | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  const out: number[] = [];
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${e}/stat`, 'utf8');
    } catch {
      continue;
    }
    // comm may contain spaces and parentheses; the fields after the last ')' are fixed.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = rest[0];
    if (Number(rest[2]) === pgid && state !== 'Z' && state !== 'X') out.push(Number(e));
  }
  return out;
}

function groupAlive(pgid: number): boolean {
  // ESRCH: the group has no member at all, not even a zombie, so the /proc scan (which reads
  // every process's stat on the machine) would find nobody either. Only a group that still
  // has someone (possibly just zombies) needs the scan.
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  const members = livingGroupMembers(pgid);
  if (members !== undefined) return members.length > 0;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false; // ESRCH: nobody left in the group
  }
}

export interface StartOptions {
  plan: LaunchPlan;
  workdir: string;
  env: EnvMap;
  runAs: RunAs | undefined;
  onLine: (stream: 'stdout' | 'stderr', line: string) => void;
}

/**
 * The task runs as the leader of its own process group (detached ⇒ setsid), so one signal to
 * -pgid reaches everything it started that did not deliberately leave the group.
 */
export class TaskProcess {
  readonly #child: ChildProcess;
  readonly exited: Promise<TaskExit>;
  readonly #outputDone: Promise<void>;
  #leaderExited = false;
  #outputPaused = false;
  #outputBytes = 0;

  constructor(opts: StartOptions) {
    this.#child = spawn(opts.plan.file, opts.plan.args, {
      cwd: opts.workdir,
      env: opts.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(opts.runAs && !opts.plan.asRoot ? { uid: opts.runAs.uid, gid: opts.runAs.gid } : {}),
    });
    const child = this.#child;

    const pump = (stream: 'stdout' | 'stderr'): Promise<void> =>
      new Promise((resolve) => {
        const readable = child[stream];
        if (!readable) return resolve();
        const splitter = new LineSplitter((line) => opts.onLine(stream, line));
        readable.on('data', (chunk: Buffer) => {
          this.#outputBytes += chunk.length;
          splitter.push(chunk);
        });
        readable.once('close', () => {
          splitter.end();
          resolve();
        });
        readable.once('error', () => undefined);
      });
    this.#outputDone = Promise.all([pump('stdout'), pump('stderr')]).then(() => undefined);

    this.exited = new Promise((resolve) => {
      child.once('error', (err: NodeJS.ErrnoException) => {
        // 'error' without a pid means the exec never happened; with a pid it is a kill failure.
        if (child.pid === undefined) {
          this.#leaderExited = true;
          resolve({ code: null, signal: null, spawnError: err.code ?? 'EUNKNOWN' });
        }
      });
      child.once('exit', (code, signal) => {
        this.#leaderExited = true;
        resolve({ code, signal });
      });
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /**
   * Backpressure: stop reading the task's stdout/stderr. Its pipes fill and the task blocks in
   * write() until resumeOutput(); nothing it wrote is lost.
   */
  pauseOutput(): void {
    this.#outputPaused = true;
    this.#child.stdout?.pause();
    this.#child.stderr?.pause();
  }

  resumeOutput(): void {
    this.#outputPaused = false;
    this.#child.stdout?.resume();
    this.#child.stderr?.resume();
  }

  /**
   * SIGTERM to the whole group, SIGKILL to whatever is left after `graceMs`. Resolves once the
   * leader has exited and no group member is running (or after the SIGKILL).
   */
  async terminateGroup(graceMs: number): Promise<void> {
    const pgid = this.#child.pid;
    if (pgid === undefined) return;
    if (!signalGroup(pgid, 'SIGTERM')) {
      if (!this.#leaderExited) await this.exited;
      return;
    }
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline) {
      if (this.#leaderExited && !groupAlive(pgid)) return;
      await sleep(50);
    }
    signalGroup(pgid, 'SIGKILL');
    await this.exited;
  }

  /** Leftover members after the leader exits (e.g. `cmd &`) do not outlive the attempt. */
  async reapGroup(graceMs: number): Promise<boolean> {
    const pgid = this.#child.pid;
    if (pgid === undefined || !groupAlive(pgid)) return false;
    await this.terminateGroup(graceMs);
    return true;
  }

  /**
   * Waits for stdout/stderr to close. A process that left the group can hold the pipes open
   * forever, so after `timeoutMs` the agent stops listening.
   */
  async outputDone(timeoutMs: number): Promise<void> {
    // The wait counts only idle time: while output is paused by backpressure or still arriving,
    // the pipes are being drained, not held open (bounded overall all the same).
    const hardDeadline = Date.now() + Math.max(timeoutMs, 120_000);
    let r: 'done' | 'timeout';
    for (;;) {
      const seen = this.#outputBytes;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), timeoutMs);
      });
      r = await Promise.race([this.#outputDone.then(() => 'done' as const), timedOut]);
      clearTimeout(timer);
      if (r === 'done') return;
      const busy = this.#outputPaused || this.#outputBytes !== seen;
      if (!busy || Date.now() >= hardDeadline) break;
    }
    if (r === 'timeout') {
      this.#child.stdout?.destroy();
      this.#child.stderr?.destroy();
    }
  }
}
