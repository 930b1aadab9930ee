import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = join(REPO, 'packages/cli/dist/main.js');

export interface Standalone {
  url: string;
  /** the Prometheus endpoint the banner prints (null when metrics are off) */
  metricsUrl: string | null;
  dataDir: string;
  token: string;
  proc: ChildProcess;
  output(): string;
  stop(): Promise<void>;
  kill9(): Promise<void>;
}

export interface StandaloneOptions {
  dataDir: string;
  dagsFolder?: string;
  agentPort?: number;
  extraArgs?: string[];
  env?: Record<string, string>;
  /** another installation's CLI entry (e.g. a copy of the checkout); default this checkout's */
  cliEntry?: string;
  /** descriptors the control plane inherits beyond stdio: child fd → an fd of this process */
  inheritFds?: Record<number, number>;
  /** leave --metrics-port out (Lite's default port), instead of 0 */
  omitMetricsPort?: boolean;
}

/** Starts a real `leoflow standalone` process and waits until it prints where it listens. */
export async function startStandalone(opts: StandaloneOptions): Promise<Standalone> {
  const args = [
    opts.cliEntry ?? CLI,
    'standalone',
    '--data-dir',
    opts.dataDir,
    '--http-port',
    '0',
    '--agent-port',
    String(opts.agentPort ?? 0),
    '--heartbeat-interval',
    '1s',
    '--agent-lost-threshold',
    '6s',
    '--dispatch-lost-threshold',
    '20s',
    ...(opts.omitMetricsPort ? [] : ['--metrics-port', '0']),
    ...(opts.dagsFolder ? ['--dags-folder', opts.dagsFolder] : []),
    ...(opts.extraArgs ?? []),
  ];
  // Tasks exchange files with a test through its scratch dir (the data dir's parent): the
  // operator's execution.writable_paths, as a test lists it. The sandbox makes the rest of the
  // filesystem read-only and gives each attempt a private /tmp, and masks the data dir itself.
  const writable = opts.extraArgs?.includes('--writable-path')
    ? {}
    : { LEOFLOW_EXECUTION_WRITABLE_PATHS: dirname(resolve(opts.dataDir)) };
  // (extra inherited fds make the stdio array's type open-ended: stdout and stderr are pipes)
  const proc = spawn(process.execPath, args, {
    cwd: REPO,
    env: { ...process.env, LEOFLOW_LOG_LEVEL: 'info', ...writable, ...opts.env },
    stdio: [
      'ignore',
      'pipe',
      'pipe',
      ...Array.from(
        { length: Math.max(0, ...Object.keys(opts.inheritFds ?? {}).map(Number)) - 2 },
        (_, i) => opts.inheritFds?.[i + 3] ?? 'ignore',
      ),
    ],
  }) as ChildProcessByStdio<null, Readable, Readable>;
  let out = '';
  proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const url = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`standalone did not start:\n${out}`)), 30_000);
    const check = () => {
      const m = /REST API\s+(http:\/\/\S+)\/api\/v1/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        res(m[1]);
      }
    };
    proc.stdout.on('data', check);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`standalone exited with ${code}:\n${out}`));
    });
  });
  const token = readFileSync(join(opts.dataDir, 'admin.token'), 'utf8').trim();
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  return {
    url,
    metricsUrl: /metrics\s+(http:\/\/\S+\/metrics)/.exec(out)?.[1] ?? null,
    dataDir: opts.dataDir,
    token,
    proc,
    output: () => out,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
    async kill9() {
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real `leoflow` CLI against a server; `input`, when given, is its standard input. */
export function cli(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 120_000,
  input?: string,
): Promise<CliResult> {
  return new Promise((res, rej) => {
    const p = spawn(process.execPath, [CLI, ...args], {
      cwd: REPO,
      env: { ...process.env, ...env },
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (input !== undefined) p.stdin?.end(input);
    let stdout = '';
    let stderr = '';
    p.stdout?.on('data', (b: Buffer) => (stdout += b.toString()));
    p.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
    const t = setTimeout(() => {
      p.kill('SIGKILL');
      rej(new Error(`leoflow ${args.join(' ')} timed out\n${stdout}\n${stderr}`));
    }, timeoutMs);
    p.once('exit', (code) => {
      clearTimeout(t);
      res({ code: code ?? -1, stdout, stderr });
    });
  });
}

export async function api<T>(
  s: { url: string; token: string },
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  const res = await fetch(`${s.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${s.token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const json = (await res.json()) as T;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** A scratch folder the unprivileged task user can write into (tasks may run as nobody). */
export function scratchDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o777);
  return {
    dir,
    cleanup: () => {
      removeWorkRoots(dir);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Each installation's work root lives outside its data dir (/tmp/leoflow-work-<install id>);
 * remove those of the data dirs directly under `dir` so test runs do not pile them up in /tmp.
 */
export function removeWorkRoots(dir: string): void {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of ['', ...entries]) {
    let id: string;
    try {
      id = readFileSync(join(dir, name, 'install-id'), 'utf8').trim();
    } catch {
      continue;
    }
    if (/^[0-9a-f]{16}$/.test(id))
      rmSync(join(tmpdir(), `leoflow-work-${id}`), { recursive: true, force: true });
  }
}

export function writeDag(
  root: string,
  name: string,
  yaml: string,
  files: Record<string, string> = {},
): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'leoflow.yaml'), yaml);
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  return dir;
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
