import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/** The tsc output by default; set AGENT_TEST_ENTRY to run the same suite against the bundle. */
export const AGENT_MAIN =
  process.env['AGENT_TEST_ENTRY'] ??
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/main.js');

export function assertAgentBuilt(): void {
  if (!existsSync(AGENT_MAIN)) {
    throw new Error(
      `${AGENT_MAIN} is missing: run \`npx tsc -b\` (npm test does it) before these tests`,
    );
  }
}

export interface RunningAgent {
  child: ChildProcess;
  pid: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** agent diagnostics (its stdout + stderr) */
  diagnostics(): string;
}

export interface SpawnAgentOptions {
  url: string;
  token: string;
  workdir: string;
  env?: Record<string, string>;
  /** leave fd 3 open without writing (bootstrap deadline tests) */
  holdTokenPipe?: boolean;
}

/** Starts the built agent exactly as the subprocess executor does: token on fd 3, minimal env. */
export function spawnAgent(opts: SpawnAgentOptions): RunningAgent {
  const child = spawn(process.execPath, [AGENT_MAIN], {
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      LANG: 'C.UTF-8',
      LEOFLOW_AGENT_URL: opts.url,
      LEOFLOW_TASK_INSTANCE_ID: 'ti-1',
      LEOFLOW_WORKDIR: opts.workdir,
      LEOFLOW_HEARTBEAT_INTERVAL_MS: '15000',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
  });
  let diag = '';
  child.stdout?.on('data', (b: Buffer) => (diag += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (diag += b.toString()));
  const pipe = child.stdio[3] as Writable;
  pipe.on('error', () => undefined);
  if (!opts.holdTokenPipe) pipe.end(`${opts.token}\n`);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, pid: child.pid!, exited, diagnostics: () => diag };
}

/** The env the subprocess executor starts a standby agent with: no attempt yet. */
export const STANDBY_ENV: Record<string, string> = {
  LEOFLOW_AGENT_STANDBY: '1',
  LEOFLOW_TASK_INSTANCE_ID: '',
  LEOFLOW_WORKDIR: '',
};

/** Hands a waiting agent its assignment on fd 3 as one JSON write, as the executor does. */
export function assign(agent: RunningAgent, assignment: Record<string, string>): void {
  (agent.child.stdio[3] as Writable).end(JSON.stringify(assignment));
}

/** A pid is gone when it no longer exists or is a zombie nobody has reaped yet. */
export function pidGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state === 'Z' || state === 'X';
  } catch {
    return true;
  }
}

export async function waitFor(
  pred: () => boolean,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
