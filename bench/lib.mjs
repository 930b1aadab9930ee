// Shared helpers for the benchmarks: a standalone process per measurement, the REST API,
// spawn baselines, /proc readers and statistics. Plain ESM (the bench runs without a build of
// its own); talks to 127.0.0.1 only, and every loop is bounded in count and in time.
import { spawn, execFileSync } from 'node:child_process';
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

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const CLI = join(REPO, 'packages/cli/dist/main.js');
export const AGENT_ENTRY_MARK = 'packages/agent/dist/main.js';
// the executor starts the bundled agent (packages/agent/dist/leoflow-agent.mjs); either counts
const AGENT_ENTRIES = [AGENT_ENTRY_MARK, 'packages/agent/dist/leoflow-agent.mjs'];
export const CLK_TCK = 100; // USER_HZ on Linux; /proc/<pid>/stat times are in these ticks

export function log(msg) {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 23)}] ${msg}\n`);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Set by run.mjs when a measurement overruns its time budget: whatever that measurement still has
// in flight stops at its next check instead of starting new processes.
let abortedReason = null;
export function abortMeasurement(reason) {
  abortedReason = reason;
}
export function resetAbort() {
  abortedReason = null;
}
export function checkAborted() {
  if (abortedReason !== null) throw new Error(`aborted: ${abortedReason}`);
}

// ---------------------------------------------------------------------------------------------
// cleanup registry: every process and temp dir a measurement creates is registered here and torn
// down by the measurement's finally, or by run.mjs on an error or a signal.

const cleanups = new Set();

/** Registers fn; returns a function that runs it once and unregisters it. */
export function onCleanup(fn) {
  let done = false;
  const once = async () => {
    if (done) return;
    done = true;
    cleanups.delete(once);
    try {
      await fn();
    } catch (err) {
      log(`cleanup failed: ${err?.message ?? err}`);
    }
  };
  cleanups.add(once);
  return once;
}

export async function cleanupAll() {
  // newest first: processes registered after their temp dir are stopped before it is removed
  for (const fn of [...cleanups].reverse()) await fn();
}

export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // tasks may run as an unprivileged user (standalone as root drops to nobody)
  chmodSync(dir, 0o755);
  const remove = onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return { dir, remove };
}

// ---------------------------------------------------------------------------------------------
// standalone

/**
 * Starts `leoflow standalone` on ephemeral loopback ports with a fresh data dir and the default
 * heartbeat interval; resolves once it prints where its REST API listens.
 */
export async function startStandalone({
  dagsFolder,
  label = 'standalone',
  startTimeoutMs = 60_000,
  extraArgs = [],
} = {}) {
  checkAborted();
  const data = tempDir(`leoflow-bench-${label}-`);
  const dataDir = join(data.dir, 'data');
  const args = [
    CLI,
    'standalone',
    '--data-dir',
    dataDir,
    '--http-port',
    '0',
    '--agent-port',
    '0',
    '--metrics-port',
    '0',
  ];
  if (dagsFolder) args.push('--dags-folder', dagsFolder);
  args.push(...extraArgs);
  const proc = spawn(process.execPath, args, {
    cwd: REPO,
    env: { ...process.env, LEOFLOW_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (b) => {
    out += b.toString();
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const exited = new Promise((r) => {
    if (proc.exitCode !== null || proc.signalCode !== null) r();
    else proc.once('exit', () => r());
  });

  const stop = onCleanup(async () => {
    // agents are detached (own process group); standalone stops them on SIGTERM, but remember
    // them so a straggler can be killed (by pid) once standalone is gone
    const agents = proc.pid !== undefined ? agentPids(proc.pid) : [];
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const t = setTimeout(() => {
        log(`${label}: no exit 15 s after SIGTERM; sending SIGKILL`);
        proc.kill('SIGKILL');
      }, 15_000);
      await exited;
      clearTimeout(t);
    }
    const stillAgents = new Set(agentPids(undefined));
    for (const pid of agents.filter((p) => stillAgents.has(p))) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await data.remove();
  });

  try {
    const url = await new Promise((res, rej) => {
      const timer = setTimeout(
        () => rej(new Error(`${label} did not start within ${startTimeoutMs} ms:\n${out}`)),
        startTimeoutMs,
      );
      const check = () => {
        const m = /REST API\s+(http:\/\/127\.0\.0\.1:\d+)\/api\/v1/.exec(out);
        if (m) {
          clearTimeout(timer);
          res(m[1]);
        }
      };
      proc.stdout.on('data', check);
      proc.once('exit', (code, sig) => {
        clearTimeout(timer);
        rej(new Error(`${label} exited (${code ?? sig}) before it started:\n${out}`));
      });
      check();
    });
    const token = readFileSync(join(dataDir, 'admin.token'), 'utf8').trim();
    const agentUrl = /agent RPC\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1] ?? null;
    return { url, agentUrl, token, pid: proc.pid, proc, dataDir, output: () => out, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export async function api(sa, method, path, body, timeoutMs = 30_000) {
  const res = await fetch(`${sa.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${sa.token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

export function writeDag(root, name, yaml) {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'leoflow.yaml'), yaml);
  return dir;
}

export async function triggerRun(sa, dagId, runId) {
  return api(sa, 'POST', `/api/v1/dags/${dagId}/runs`, { run_id: runId });
}

/** Polls the run detail until the run is terminal; bounded by timeoutMs. */
export async function waitForRun(sa, dagId, runId, { timeoutMs = 120_000, pollMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    checkAborted();
    const d = await api(sa, 'GET', `/api/v1/dags/${dagId}/runs/${runId}`);
    if (d.run.state === 'success' || d.run.state === 'failed') return d;
    if (Date.now() > deadline) {
      const states = {};
      for (const ti of d.task_instances) states[ti.state] = (states[ti.state] ?? 0) + 1;
      throw new Error(
        `run ${dagId}/${runId} not finished after ${timeoutMs} ms (run ${d.run.state}, tasks ${JSON.stringify(states)})`,
      );
    }
    await sleep(pollMs);
  }
}

export async function taskLogs(sa, dagId, runId, taskId) {
  const r = await api(
    sa,
    'GET',
    `/api/v1/dags/${dagId}/runs/${runId}/tasks/${taskId}/logs?limit=10000`,
  );
  return r.lines;
}

/** A one-line account of a run that did not succeed: each unsuccessful task and its error. */
export function describeFailure(detail, sa) {
  const bad = detail.task_instances
    .filter((t) => t.state !== 'success')
    .slice(0, 5)
    .map((t) => `${t.task_id}=${t.state}${t.error_message ? ` (${t.error_message})` : ''}`);
  let diag = '';
  if (sa) {
    // the agents' own diagnostics (warnings and errors only) say why an attempt failed early
    const dir = join(sa.dataDir, 'agents');
    try {
      const lines = [];
      for (const f of readdirSync(dir).slice(0, 1_000)) {
        for (const l of readFileSync(join(dir, f), 'utf8').split('\n')) {
          if (/ (warn|error) /.test(l) && lines.length < 10) lines.push(l);
        }
      }
      if (lines.length > 0) diag = `\nagent diagnostics:\n${lines.join('\n')}`;
    } catch {
      // no diagnostics
    }
  }
  return `run ${detail.run.run_id} ended ${detail.run.state}: ${bad.join('; ')}${diag}`;
}

export const ms = (iso) => (iso === null || iso === undefined ? null : Date.parse(iso));

// ---------------------------------------------------------------------------------------------
// processes and /proc

/**
 * pids of agent processes (`node …/packages/agent/dist/main.js` or the bundled
 * `…/leoflow-agent.mjs`) whose parent is parentPid. With `withChildren`, only agents that have a
 * child process themselves, i.e. run a task (standby agents wait without one).
 */
export function agentPids(parentPid, { withChildren = false } = {}) {
  let text;
  try {
    text = execFileSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8', timeout: 5_000 });
  } catch {
    return [];
  }
  const pids = [];
  const parents = new Set();
  for (const line of text.split('\n')) {
    const m = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
    if (!m) continue;
    parents.add(Number(m[2]));
    if (!AGENT_ENTRIES.some((e) => m[3].includes(e))) continue;
    if (parentPid !== undefined && Number(m[2]) !== parentPid) continue;
    pids.push(Number(m[1]));
  }
  return withChildren ? pids.filter((p) => parents.has(p)) : pids;
}

/** VmHWM / VmRSS in kB from /proc/<pid>/status, or null when the process is gone. */
export function procMem(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const kb = (k) => {
    const m = new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(text);
    return m ? Number(m[1]) : null;
  };
  return { hwm_kb: kb('VmHWM'), rss_kb: kb('VmRSS') };
}

/** CPU of pid itself and of its waited-for descendants, in ms (from /proc/<pid>/stat). */
export function procCpu(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // fields after "(comm)": state is field 3; utime 14, stime 15, cutime 16, cstime 17
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const f = (n) => Number(rest[n - 3]);
  const t = (ticks) => (ticks * 1000) / CLK_TCK;
  return { self_ms: t(f(14) + f(15)), children_ms: t(f(16) + f(17)) };
}

/** Runs one command to completion; resolves its wall time in ms (spawn call → exit event). */
/**
 * The environment a baseline spawn gets: the variables the subprocess executor passes its agents
 * (packages/server/src/executor/subprocess-executor.ts, INHERITED_ENV) and nothing else. A
 * baseline spawned with the bench's own environment measures that environment too: on a machine
 * that sets NODE_EXTRA_CA_CERTS to the system bundle, `node -e 0` loads every CA at start and
 * takes twice as long, which an agent (which never gets that variable) does not pay.
 */
export const BASELINE_ENV = Object.fromEntries(
  ['PATH', 'LANG', 'LC_ALL', 'TZ'].flatMap((k) =>
    process.env[k] === undefined ? [] : [[k, process.env[k]]],
  ),
);

export function timedSpawn(
  file,
  args,
  { timeoutMs = 30_000, env = BASELINE_ENV, okCodes = [0] } = {},
) {
  checkAborted();
  return new Promise((res, rej) => {
    const t0 = performance.now();
    const p = spawn(file, args, { stdio: 'ignore', env });
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      rej(new Error(`${file} ${args.join(' ')} took longer than ${timeoutMs} ms`));
    }, timeoutMs);
    p.once('error', (err) => {
      clearTimeout(timer);
      rej(err);
    });
    p.once('exit', (code) => {
      clearTimeout(timer);
      if (!okCodes.includes(code)) rej(new Error(`${file} ${args.join(' ')} exited with ${code}`));
      else res(performance.now() - t0);
    });
  });
}

/** Runs a node script to completion and parses the last stdout line as JSON. */
export function nodeJson(script, args, timeoutMs = 30_000) {
  checkAborted();
  return new Promise((res, rej) => {
    const p = spawn(process.execPath, [script, ...args], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (b) => (out += b.toString()));
    p.stderr.on('data', (b) => (err += b.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.once('error', (e) => {
      clearTimeout(timer);
      rej(e);
    });
    p.once('exit', (code, sig) => {
      clearTimeout(timer);
      const last = out.trim().split('\n').pop();
      try {
        if (code !== 0) throw new Error(`exit ${code ?? sig}`);
        res(JSON.parse(last));
      } catch (e) {
        rej(new Error(`${script}: ${e.message}\n${err.slice(-2000)}`));
      }
    });
  });
}

/** n sequential spawns → {p50, p95, max, mean} wall ms and CPU per spawn (one untimed warm-up first). */
export async function sequentialSpawnStats(file, args, n, opts = {}) {
  await timedSpawn(file, args, opts);
  const xs = [];
  const cpu0 = procCpu(process.pid);
  for (let i = 0; i < n; i++) xs.push(await timedSpawn(file, args, opts));
  const cpu1 = procCpu(process.pid);
  return {
    n,
    ...summary(xs),
    cpu_ms_per_spawn: cpu0 && cpu1 ? round((cpu1.children_ms - cpu0.children_ms) / n, 1) : null,
  };
}

/**
 * n spawns with at most `concurrency` in flight; wall time of the whole batch, spawns per second,
 * and the CPU the children used (from this process's cutime/cstime).
 */
export async function concurrentSpawns(file, args, n, concurrency) {
  await timedSpawn(file, args);
  const cpu0 = procCpu(process.pid);
  const t0 = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < n) {
      next++;
      await timedSpawn(file, args);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  const wall = performance.now() - t0;
  const cpu1 = procCpu(process.pid);
  return {
    n,
    concurrency,
    wall_ms: round(wall),
    per_s: round((n * 1000) / wall, 2),
    cpu_ms_per_spawn: cpu0 && cpu1 ? round((cpu1.children_ms - cpu0.children_ms) / n, 1) : null,
  };
}

// ---------------------------------------------------------------------------------------------
// statistics

/** Nearest-rank percentile (p in 0..100) of a non-empty array. */
export function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[Math.min(rank, s.length) - 1];
}

export function summary(xs, digits = 1) {
  if (xs.length === 0) return { p50: null, p95: null, max: null, mean: null };
  return {
    p50: round(percentile(xs, 50), digits),
    p95: round(percentile(xs, 95), digits),
    max: round(Math.max(...xs), digits),
    mean: round(xs.reduce((a, b) => a + b, 0) / xs.length, digits),
  };
}

export function round(x, digits = 1) {
  if (x === null || x === undefined || !Number.isFinite(x)) return null;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function ratio(a, b, digits = 2) {
  if (a === null || b === null || b === 0) return null;
  return round(a / b, digits);
}
