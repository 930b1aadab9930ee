// throughput: attempts per second for many independent no-op tasks under max_active_tasks,
// beside plain `node -e 0` spawns at the same concurrency.
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import {
  BASELINE_ENV,
  REPO,
  agentPids,
  concurrentSpawns,
  describeFailure,
  log,
  ms,
  procCpu,
  ratio,
  round,
  sequentialSpawnStats,
  sleep,
  startStandalone,
  summary,
  tempDir,
  triggerRun,
  waitForRun,
  writeDag,
} from './lib.mjs';

const TARGET_RATIO = 0.5;
const DAG_ID = 'bench_fanout';

export const description =
  'independent no-op bash tasks (true) in one DAG: tasks / (last ended_at - run started_at)';

/** The host agent's pid when standalone runs one (its pid file appears once it started). */
async function hostAgentPid(sa) {
  if (process.env.LEOFLOW_EXECUTION_HOST_AGENT !== 'on') return null;
  for (let i = 0; i < 100; i++) {
    try {
      const pid = Number(readFileSync(join(sa.dataDir, 'host-agent.pid'), 'utf8').trim());
      if (pid > 0) return pid;
    } catch {
      // not yet
    }
    await sleep(100);
  }
  return null;
}

export async function run({ quick }) {
  const n = quick ? 32 : 200;
  const concurrency = 16;

  log(`throughput: baseline: ${n} spawns of node -e 0, ${concurrency} concurrent`);
  const baseline = await concurrentSpawns(process.execPath, ['-e', '0'], n, concurrency);
  // Profiling aid: what one agent costs before any RPC (boot + module load; exits 2 on its empty
  // env), started from the entry the executor uses (the bundle, with its code cache).
  const agentCold = await sequentialSpawnStats(
    process.execPath,
    [join(REPO, 'packages/agent/dist/leoflow-agent.mjs')],
    quick ? 5 : 20,
    {
      env: {},
      okCodes: [2],
    },
  );

  const dags = tempDir('leoflow-bench-dags-');
  const tasks = [];
  for (let i = 0; i < n; i++)
    tasks.push(
      `  - task_id: t${String(i).padStart(3, '0')}\n    type: bash\n    command: "true"\n`,
    );
  writeDag(
    dags.dir,
    DAG_ID,
    `dag_id: ${DAG_ID}\nschedule: null\nmax_active_tasks: ${concurrency}\ntasks:\n${tasks.join('')}`,
  );

  const sa = await startStandalone({ dagsFolder: dags.dir, label: 'throughput' });
  let detail;
  let cpu0;
  let cpu1;
  // execution.host_agent on (LEOFLOW_EXECUTION_HOST_AGENT=on): one long-lived agent runs every
  // attempt; its CPU and its reaped tasks' are its own (it is not reaped during the run).
  const hostPid = await hostAgentPid(sa);
  let host0;
  let host1;
  try {
    log(`throughput: one run of ${n} tasks, max_active_tasks ${concurrency}`);
    cpu0 = procCpu(sa.pid);
    host0 = hostPid === null ? null : procCpu(hostPid);
    await triggerRun(sa, DAG_ID, 'fanout_1');
    detail = await waitForRun(sa, DAG_ID, 'fanout_1', {
      timeoutMs: 60_000 + n * 3_000,
      pollMs: 500,
    });
    if (detail.run.state !== 'success') throw new Error(describeFailure(detail, sa));
    // agents exit right after their report is acknowledged; wait (bounded) until the last ones
    // are reaped so their CPU shows up in standalone's cutime/cstime
    for (let i = 0; i < 50 && agentPids(sa.pid).length > 0; i++) await sleep(100);
    cpu1 = procCpu(sa.pid);
    host1 = hostPid === null ? null : procCpu(hostPid);
  } finally {
    await sa.stop();
    await dags.remove();
  }

  const tis = detail.task_instances;
  const runStart = ms(detail.run.started_at);
  const lastEnd = Math.max(...tis.map((t) => ms(t.ended_at)));
  const firstQueued = Math.min(...tis.map((t) => ms(t.queued_at)));
  const wall = lastEnd - runStart;
  const perS = (n * 1000) / wall;

  // Where an attempt's time goes, and how busy the 16 slots were.
  const queuedToRegistered = tis.map((t) => ms(t.started_at) - ms(t.queued_at));
  const registeredToEnded = tis.map((t) => ms(t.ended_at) - ms(t.started_at));
  const slotTime = tis.reduce((a, t) => a + (ms(t.ended_at) - ms(t.queued_at)), 0);
  // the gap between a slot freeing (an ended_at) and the next dispatch (the next queued_at)
  const ends = tis.map((t) => ms(t.ended_at)).sort((a, b) => a - b);
  const queues = tis.map((t) => ms(t.queued_at)).sort((a, b) => a - b);
  const refill = [];
  for (let i = concurrency; i < queues.length; i++) refill.push(queues[i] - ends[i - concurrency]);

  const serverCpu = cpu0 && cpu1 ? cpu1.self_ms - cpu0.self_ms : null;
  const hostCpu =
    host0 && host1 ? host1.self_ms - host0.self_ms + (host1.children_ms - host0.children_ms) : 0;
  const agentCpu = cpu0 && cpu1 ? cpu1.children_ms - cpu0.children_ms + hostCpu : null;
  const r = ratio(perS, baseline.per_s);
  return {
    description,
    tasks: n,
    max_active_tasks: concurrency,
    wall_ms: wall,
    attempts_per_s: round(perS, 2),
    run_started_to_first_queued_ms: firstQueued - runStart,
    breakdown_ms: {
      queued_to_agent_registered: summary(queuedToRegistered),
      registered_to_success_recorded: summary(registeredToEnded),
      slot_freed_to_next_queued: summary(refill),
      mean_active_attempts: round(slotTime / wall, 1),
    },
    host_agent: hostPid !== null,
    cpu_ms_per_attempt: {
      control_plane: serverCpu === null ? null : round(serverCpu / n, 1),
      agent_and_task: agentCpu === null ? null : round(agentCpu / n, 1),
      of_which_agent_cold_start: agentCold.cpu_ms_per_spawn,
      note:
        'from /proc/<standalone>/stat: utime+stime (control plane) and cutime+cstime (reaped agents, which include their tasks); ' +
        "of_which_agent_cold_start = CPU of `node packages/agent/dist/leoflow-agent.mjs` (the executor's entry) exiting on an empty env (boot + module load)",
    },
    cpu_bound_attempts_per_s:
      serverCpu === null || agentCpu === null
        ? null
        : round((cpus().length * 1000 * n) / (serverCpu + agentCpu), 2),
    baseline: {
      spawn_env: Object.keys(BASELINE_ENV).join(', '),
      node_spawns: baseline,
      node_spawns_cpu_bound_per_s: baseline.cpu_ms_per_spawn
        ? round((cpus().length * 1000) / baseline.cpu_ms_per_spawn, 2)
        : null,
      agent_cold_start: agentCold,
    },
    ratio: r,
    cpu_ratio_agent_to_node_spawn:
      agentCpu === null || baseline.cpu_ms_per_spawn === null
        ? null
        : ratio(agentCpu / n, baseline.cpu_ms_per_spawn),
    target: { ratio_min: TARGET_RATIO },
    meets_target: r !== null && r >= TARGET_RATIO,
  };
}
