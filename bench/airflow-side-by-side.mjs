// airflow_side_by_side: the same work in Leoflow Lite and in Apache Airflow 3.3.2, one after the
// other on this machine, in one run: a chain of no-op bash tasks (downstream printed start −
// upstream recorded end), independent no-op tasks (tasks/s), trigger → first task's printed
// start, and the idle memory of each system's whole process tree. Airflow runs twice: `airflow
// standalone` as shipped (SQLite) and the same components on the local PostgreSQL with the
// LocalExecutor and parallelism 16 (Leoflow's slots here). Each setup is documented in
// bench/README.md. Not in CI: it installs Airflow from PyPI (scripts/python-env.sh airflow-bench)
// and takes 10-20 minutes.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import {
  REPO,
  checkAborted,
  describeFailure,
  log,
  ms,
  onCleanup,
  ratio,
  round,
  sleep,
  startStandalone,
  summary,
  taskLogs,
  tempDir,
  triggerRun,
  waitForRun,
  writeDag,
} from './lib.mjs';

export const description =
  'Leoflow Lite beside Apache Airflow 3.3.2 (standalone on SQLite; LocalExecutor on PostgreSQL, parallelism 16): chain latency, tasks/s, trigger → first task, idle memory';

/** The whole comparison (three systems, one after the other) needs more than the usual 15 min. */
export const timeoutMs = { quick: 20 * 60_000, full: 60 * 60_000 };

const AIRFLOW_VERSION = '3.3.2';
const SLOTS = 16;
/** Both systems' runs are polled this often (the figures come from recorded times, not polls). */
const POLL_MS = 500;
/** Airflow status polls that timed out (30 s) during the current setup. */
let slowPolls = 0;
const CHAIN = 'bench_chain';
const FANOUT = 'bench_fanout';
const WARM = 'bench_warm';
const PG_ADMIN_URL =
  process.env.LEOFLOW_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export async function run({ quick }) {
  const sizes = {
    chain_length: quick ? 5 : 20,
    chain_runs: quick ? 1 : 3,
    fanout_tasks: quick ? 32 : 200,
    idle_ms: quick ? 5_000 : 15_000,
  };
  const venv = airflowVenv();
  const results = {};
  // The machine is shared: each system's figures carry the load average around them.
  const loaded = async (fn) => {
    const before = loadavg().map((x) => round(x, 2));
    const r = await fn();
    return { ...r, load_average: { before, after: loadavg().map((x) => round(x, 2)) } };
  };
  log('airflow_side_by_side: Leoflow Lite');
  results.leoflow_lite = await loaded(() => measureLeoflow(sizes));
  log('airflow_side_by_side: Airflow standalone (as shipped: SQLite)');
  results.airflow_standalone = await loaded(() =>
    measureAirflow(venv, sizes, { setup: 'standalone' }),
  );
  log(`airflow_side_by_side: Airflow on PostgreSQL, LocalExecutor, parallelism ${SLOTS}`);
  results.airflow_postgres_local = await loaded(() =>
    measureAirflow(venv, sizes, { setup: 'postgres' }),
  );

  const vs = (k) => ({
    chain_p50: ratio(results[k].chain.latency_ms.p50, results.leoflow_lite.chain.latency_ms.p50),
    chain_p95: ratio(results[k].chain.latency_ms.p95, results.leoflow_lite.chain.latency_ms.p95),
    trigger_to_first_task_p50: ratio(
      results[k].trigger_to_first_task_ms.p50,
      results.leoflow_lite.trigger_to_first_task_ms.p50,
    ),
    tasks_per_s: ratio(results.leoflow_lite.fanout.tasks_per_s, results[k].fanout.tasks_per_s),
    idle_pss: ratio(results[k].idle_memory.pss_mb, results.leoflow_lite.idle_memory.pss_mb),
    idle_rss: ratio(results[k].idle_memory.rss_mb, results.leoflow_lite.idle_memory.rss_mb),
  });
  return {
    description,
    commit: gitCommit(),
    machine: {
      cpus: cpus().length,
      cpu_model: cpus()[0]?.model ?? null,
      memory_mb: Math.round(totalmem() / 2 ** 20),
      load_average_at_end: loadavg().map((x) => round(x, 2)),
    },
    sizes: { ...sizes, slots: SLOTS },
    airflow: { version: AIRFLOW_VERSION, venv_lock: 'python/requirements/airflow-bench.txt' },
    results,
    // How many times Leoflow's figure is better: Airflow ÷ Leoflow for times and memory,
    // Leoflow ÷ Airflow for tasks/s.
    leoflow_advantage: {
      vs_airflow_standalone: vs('airflow_standalone'),
      vs_airflow_postgres_local: vs('airflow_postgres_local'),
    },
    // a comparison, not a goal
    meets_target: true,
  };
}

// ---------------------------------------------------------------------------------------------
// Leoflow Lite

async function measureLeoflow(sizes) {
  const dags = tempDir('leoflow-bench-dags-');
  writeDag(
    dags.dir,
    WARM,
    `dag_id: ${WARM}\nschedule: null\ntasks:\n  - task_id: t\n    type: bash\n    command: date +%s%3N\n`,
  );
  const chain = [];
  for (let i = 0; i < sizes.chain_length; i++) {
    chain.push(
      `  - task_id: ${taskId(i)}\n    type: bash\n    command: date +%s%3N\n` +
        (i > 0 ? `    depends_on: [${taskId(i - 1)}]\n` : ''),
    );
  }
  writeDag(dags.dir, CHAIN, `dag_id: ${CHAIN}\nschedule: null\ntasks:\n${chain.join('')}`);
  const fan = [];
  for (let i = 0; i < sizes.fanout_tasks; i++) {
    fan.push(`  - task_id: f${String(i).padStart(3, '0')}\n    type: bash\n    command: "true"\n`);
  }
  writeDag(
    dags.dir,
    FANOUT,
    `dag_id: ${FANOUT}\nschedule: null\nmax_active_tasks: ${SLOTS}\ntasks:\n${fan.join('')}`,
  );

  const started = Date.now();
  const sa = await startStandalone({ dagsFolder: dags.dir, label: 'side-by-side' });
  try {
    const readyMs = Date.now() - started;
    await sleep(sizes.idle_ms);
    const idle = treeMemory(sa.pid);
    await triggerRun(sa, WARM, 'warm_1');
    await waitForRun(sa, WARM, 'warm_1', { timeoutMs: 60_000, pollMs: POLL_MS });

    const hops = [];
    const firsts = [];
    for (let r = 0; r < sizes.chain_runs; r++) {
      const runId = `chain_${r + 1}`;
      const t0 = Date.now();
      await triggerRun(sa, CHAIN, runId);
      const detail = await waitForRun(sa, CHAIN, runId, {
        timeoutMs: 60_000 + sizes.chain_length * 10_000,
        pollMs: POLL_MS,
      });
      if (detail.run.state !== 'success') throw new Error(describeFailure(detail, sa));
      const byTask = new Map(detail.task_instances.map((ti) => [ti.task_id, ti]));
      const printed = [];
      for (let i = 0; i < sizes.chain_length; i++) {
        const lines = await taskLogs(sa, CHAIN, runId, taskId(i));
        const line = lines.find((l) => l.stream === 'stdout' && /^\d{13}$/.test(l.message.trim()));
        if (!line) throw new Error(`${runId}/${taskId(i)}: no printed start in the logs`);
        printed.push(Number(line.message.trim()));
      }
      firsts.push(printed[0] - t0);
      for (let i = 1; i < sizes.chain_length; i++) {
        const up = byTask.get(taskId(i - 1));
        const down = byTask.get(taskId(i));
        hops.push({
          latency: printed[i] - ms(up.ended_at),
          scheduler: ms(down.queued_at) - ms(up.ended_at),
          queuedToPrinted: printed[i] - ms(down.queued_at),
        });
      }
    }

    await triggerRun(sa, FANOUT, 'fanout_1');
    const fan1 = await waitForRun(sa, FANOUT, 'fanout_1', {
      timeoutMs: 120_000 + sizes.fanout_tasks * 3_000,
      pollMs: POLL_MS,
    });
    if (fan1.run.state !== 'success') throw new Error(describeFailure(fan1, sa));
    const runStart = ms(fan1.run.started_at);
    const lastEnd = Math.max(...fan1.task_instances.map((t) => ms(t.ended_at)));
    return {
      setup: 'leoflow standalone (Lite) with defaults; the fan-out DAG sets max_active_tasks: 16',
      start_to_api_ready_ms: readyMs,
      idle_memory: idle,
      chain: chainResult(hops),
      trigger_to_first_task_ms: summary(firsts),
      fanout: fanoutResult(sizes.fanout_tasks, runStart, lastEnd),
    };
  } finally {
    await sa.stop();
    await dags.remove();
  }
}

// ---------------------------------------------------------------------------------------------
// Airflow

/** The bench's Airflow venv (created from the committed lock file the first time: needs PyPI). */
function airflowVenv() {
  log('airflow_side_by_side: scripts/python-env.sh airflow-bench (first time: installs from PyPI)');
  const out = execFileSync(join(REPO, 'scripts/python-env.sh'), ['airflow-bench'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 15 * 60_000,
  }).trim();
  const version = execFileSync(
    join(out, 'bin/python'),
    ['-c', 'import airflow; print(airflow.__version__)'],
    {
      encoding: 'utf8',
      env: { PATH: process.env.PATH, AIRFLOW_HOME: tempDir('leoflow-bench-airflow-probe-').dir },
    },
  ).trim();
  if (version !== AIRFLOW_VERSION)
    throw new Error(`the bench venv has Airflow ${version}, not ${AIRFLOW_VERSION}`);
  return out;
}

function airflowDags(dir, sizes) {
  mkdirSync(dir, { recursive: true });
  const head =
    'from airflow.sdk import DAG\nfrom airflow.providers.standard.operators.bash import BashOperator\n\n';
  writeFileSync(
    join(dir, `${WARM}.py`),
    `${head}with DAG("${WARM}", schedule=None):\n    BashOperator(task_id="t", bash_command="date +%s%3N")\n`,
  );
  writeFileSync(
    join(dir, `${CHAIN}.py`),
    `${head}with DAG("${CHAIN}", schedule=None):\n    prev = None\n    for i in range(${sizes.chain_length}):\n` +
      `        t = BashOperator(task_id=f"t{i:02d}", bash_command="date +%s%3N")\n` +
      `        if prev is not None:\n            prev >> t\n        prev = t\n`,
  );
  writeFileSync(
    join(dir, `${FANOUT}.py`),
    `${head}with DAG("${FANOUT}", schedule=None, max_active_tasks=${SLOTS}):\n    for i in range(${sizes.fanout_tasks}):\n` +
      `        BashOperator(task_id=f"f{i:03d}", bash_command="true")\n`,
  );
}

async function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function measureAirflow(venv, sizes, { setup }) {
  checkAborted();
  const home = tempDir(`leoflow-bench-airflow-${setup}-`);
  const dagsDir = join(home.dir, 'dags');
  airflowDags(dagsDir, sizes);
  const port = await freePort();
  const env = {
    PATH: `${join(venv, 'bin')}:${process.env.PATH}`,
    LANG: 'C.UTF-8',
    HOME: home.dir,
    AIRFLOW_HOME: home.dir,
    // What the bench changes in every setup: no example DAGs, the API on a free loopback port
    // (and the task SDK pointed at it), nothing else.
    AIRFLOW__CORE__LOAD_EXAMPLES: 'False',
    AIRFLOW__API__HOST: '127.0.0.1',
    AIRFLOW__API__PORT: String(port),
    AIRFLOW__CORE__EXECUTION_API_SERVER_URL: `http://127.0.0.1:${port}/execution/`,
  };
  let dropDb = null;
  if (setup === 'postgres') {
    const db = `lf_bench_airflow_${process.pid}_${Date.now()}`;
    await pgAdmin(`CREATE DATABASE "${db}"`);
    dropDb = onCleanup(() => pgAdmin(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`));
    const u = new URL(PG_ADMIN_URL);
    u.protocol = 'postgresql+psycopg2:';
    u.pathname = `/${db}`;
    Object.assign(env, {
      AIRFLOW__DATABASE__SQL_ALCHEMY_CONN: u.toString(),
      AIRFLOW__CORE__EXECUTOR: 'LocalExecutor',
      AIRFLOW__CORE__PARALLELISM: String(SLOTS),
    });
  }

  slowPolls = 0;
  const started = Date.now();
  const af = startAirflowStandalone(env, home.dir, setup);
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitFor(
      async () => (await fetch(`${base}/api/v2/monitor/health`).catch(() => null))?.ok,
      240_000,
      `${setup}: API`,
      af,
    );
    const token = await airflowToken(base, home.dir, af);
    const call = (method, path, body) => airflowApi(base, token, method, path, body);
    for (const dag of [WARM, CHAIN, FANOUT]) {
      await waitFor(
        async () => (await call('GET', `/api/v2/dags/${dag}`).catch(() => null)) !== null,
        240_000,
        `${setup}: DAG ${dag} parsed`,
        af,
      );
      // As shipped, new DAGs are paused: unpause through the API, as a user would.
      await call('PATCH', `/api/v2/dags/${dag}`, { is_paused: false });
    }
    const readyMs = Date.now() - started;
    await sleep(sizes.idle_ms);
    const idle = treeMemory(af.pid);
    const cfg = {
      executor: airflowConfig(env, 'core', 'executor'),
      parallelism: airflowConfig(env, 'core', 'parallelism'),
      max_active_tasks_per_dag: airflowConfig(env, 'core', 'max_active_tasks_per_dag'),
      database: setup === 'postgres' ? 'postgresql (local, 127.0.0.1:5432)' : 'sqlite',
    };

    await airflowRun(call, WARM, 'warm_1', 300_000);
    const hops = [];
    const firsts = [];
    for (let r = 0; r < sizes.chain_runs; r++) {
      const runId = `chain_${r + 1}`;
      const t0 = Date.now();
      const tis = await airflowRun(call, CHAIN, runId, 120_000 + sizes.chain_length * 30_000);
      const byTask = new Map(tis.map((t) => [t.task_id, t]));
      const printed = [];
      for (let i = 0; i < sizes.chain_length; i++) {
        printed.push(airflowPrinted(home.dir, CHAIN, runId, taskId(i)));
      }
      firsts.push(printed[0] - t0);
      for (let i = 1; i < sizes.chain_length; i++) {
        const up = byTask.get(taskId(i - 1));
        const down = byTask.get(taskId(i));
        hops.push({
          latency: printed[i] - ms(up.end_date),
          scheduler: ms(down.queued_when) - ms(up.end_date),
          queuedToPrinted: printed[i] - ms(down.queued_when),
        });
      }
    }
    const fanStart = Date.now();
    const tis = await airflowRun(call, FANOUT, 'fanout_1', 300_000 + sizes.fanout_tasks * 10_000);
    const run = await call('GET', `/api/v2/dags/${FANOUT}/dagRuns/fanout_1`);
    const lastEnd = Math.max(...tis.map((t) => ms(t.end_date)));
    return {
      setup:
        setup === 'standalone'
          ? '`airflow standalone` as shipped (SQLite in AIRFLOW_HOME, its own default executor), API on a free loopback port, no example DAGs'
          : `\`airflow standalone\` with the metadata DB on the local PostgreSQL, executor LocalExecutor, parallelism ${SLOTS}; otherwise as shipped`,
      config: cfg,
      start_to_dags_ready_ms: readyMs,
      idle_memory: idle,
      chain: chainResult(hops),
      trigger_to_first_task_ms: summary(firsts),
      fanout: {
        ...fanoutResult(sizes.fanout_tasks, ms(run.start_date) ?? fanStart, lastEnd),
        max_concurrent_tasks: maxConcurrent(tis),
      },
      api_status_polls_timed_out: slowPolls,
    };
  } finally {
    await af.stop();
    await home.remove();
    if (dropDb) await dropDb();
  }
}

function airflowConfig(env, section, key) {
  try {
    return execFileSync('airflow', ['config', 'get-value', section, key], {
      encoding: 'utf8',
      env,
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 60_000,
    }).trim();
  } catch {
    return null;
  }
}

/** `airflow standalone` in its own process group, stopped (group-wide) on cleanup. */
function startAirflowStandalone(env, home, label) {
  const proc = spawn('airflow', ['standalone'], {
    cwd: home,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (b) => {
    out = (out + b.toString()).slice(-100_000);
  };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const exited = new Promise((r) => proc.once('exit', () => r()));
  const signalGroup = (sig) => {
    try {
      process.kill(-proc.pid, sig);
    } catch {
      // the group is gone
    }
  };
  const stop = onCleanup(async () => {
    signalGroup('SIGTERM');
    const done = await Promise.race([exited.then(() => true), sleep(30_000).then(() => false)]);
    if (!done) log(`airflow ${label}: no exit 30 s after SIGTERM; SIGKILL to its process group`);
    // the components it started outlive it on SIGTERM; the whole group goes
    await sleep(2_000);
    signalGroup('SIGKILL');
  });
  return { pid: proc.pid, proc, output: () => out, stop };
}

async function waitFor(check, timeoutMs, what, af) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    checkAborted();
    if (await check()) return;
    if (af.proc.exitCode !== null)
      throw new Error(`${what}: airflow exited:\n${af.output().slice(-3_000)}`);
    if (Date.now() > deadline)
      throw new Error(`${what}: not ready after ${timeoutMs} ms:\n${af.output().slice(-3_000)}`);
    await sleep(500);
  }
}

/** A JWT from the simple auth manager, with the admin password standalone generated. */
async function airflowToken(base, home, af) {
  const file = join(home, 'simple_auth_manager_passwords.json.generated');
  await waitFor(async () => existsSync(file), 60_000, 'generated admin password', af);
  const passwords = JSON.parse(readFileSync(file, 'utf8'));
  const res = await fetch(`${base}/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'admin', password: passwords.admin }),
  });
  if (!res.ok) throw new Error(`POST /auth/token: ${res.status} ${await res.text()}`);
  return (await res.json()).access_token;
}

async function airflowApi(base, token, method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

/** Triggers a run, waits for it to end, returns its task instances. */
async function airflowRun(call, dag, runId, timeoutMs) {
  await call('POST', `/api/v2/dags/${dag}/dagRuns`, { dag_run_id: runId, logical_date: null });
  const deadline = Date.now() + timeoutMs;
  let run = { state: 'unknown' };
  for (;;) {
    checkAborted();
    try {
      run = await call('GET', `/api/v2/dags/${dag}/dagRuns/${runId}`);
    } catch (err) {
      // On SQLite, a read can wait behind the scheduler's and the tasks' writes for longer than
      // the request timeout; that is a slow poll, counted, not a failed run.
      if (err?.name !== 'TimeoutError') throw err;
      slowPolls++;
    }
    if (run.state === 'success' || run.state === 'failed') break;
    if (Date.now() > deadline)
      throw new Error(`airflow ${dag}/${runId}: still ${run.state} after ${timeoutMs} ms`);
    await sleep(POLL_MS);
  }
  const tis = (await call('GET', `/api/v2/dags/${dag}/dagRuns/${runId}/taskInstances?limit=1000`))
    .task_instances;
  if (run.state !== 'success') {
    const bad = tis
      .filter((t) => t.state !== 'success')
      .slice(0, 5)
      .map((t) => `${t.task_id}=${t.state}`);
    throw new Error(`airflow ${dag}/${runId} ended ${run.state}: ${bad.join(', ')}`);
  }
  return tis;
}

/** The 13-digit `date +%s%3N` line in a task's log file (JSON lines, one event per line). */
function airflowPrinted(home, dag, runId, task) {
  const file = join(
    home,
    'logs',
    `dag_id=${dag}`,
    `run_id=${runId}`,
    `task_id=${task}`,
    'attempt=1.log',
  );
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.includes('"event"')) continue;
    try {
      const e = JSON.parse(line).event;
      if (typeof e === 'string' && /^\d{13}$/.test(e.trim())) return Number(e.trim());
    } catch {
      // not JSON
    }
  }
  throw new Error(`${file}: no printed start`);
}

function maxConcurrent(tis) {
  const ev = [];
  for (const t of tis) {
    ev.push([ms(t.start_date), 1], [ms(t.end_date), -1]);
  }
  ev.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let cur = 0;
  let max = 0;
  for (const [, d] of ev) max = Math.max(max, (cur += d));
  return max;
}

async function pgAdmin(q) {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 5_000 });
  c.on('error', () => undefined);
  await c.connect();
  try {
    await c.query(q);
  } finally {
    await c.end().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// shared

function chainResult(hops) {
  const col = (k) => hops.map((h) => h[k]).filter((x) => Number.isFinite(x));
  return {
    hops: hops.length,
    latency_ms: summary(col('latency')),
    breakdown_ms: {
      upstream_end_to_downstream_queued: summary(col('scheduler')),
      downstream_queued_to_printed: summary(col('queuedToPrinted')),
    },
  };
}

function fanoutResult(n, runStart, lastEnd) {
  const wall = lastEnd - runStart;
  return { tasks: n, wall_ms: wall, tasks_per_s: round((n * 1000) / wall, 2) };
}

/**
 * RSS and PSS (proportional set size: shared pages split between their users, so forked
 * workers are not counted many times) summed over a process and all its descendants.
 */
function treeMemory(rootPid) {
  const children = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(d));
    } catch {
      // gone
    }
  }
  const pids = [];
  const walk = (p) => {
    pids.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(rootPid);
  let rss = 0;
  let pss = 0;
  for (const p of pids) {
    try {
      const t = readFileSync(`/proc/${p}/smaps_rollup`, 'utf8');
      rss += Number(/^Rss:\s+(\d+) kB/m.exec(t)?.[1] ?? 0);
      pss += Number(/^Pss:\s+(\d+) kB/m.exec(t)?.[1] ?? 0);
    } catch {
      // gone, or no smaps_rollup
    }
  }
  return { processes: pids.length, rss_mb: round(rss / 1024, 1), pss_mb: round(pss / 1024, 1) };
}

function taskId(i) {
  return `t${String(i).padStart(2, '0')}`;
}

function gitCommit() {
  try {
    return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
      cwd: REPO,
      encoding: 'utf8',
    }).trim();
  } catch {
    return null;
  }
}
