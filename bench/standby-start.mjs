// attempt_start_latency: under Lite, how long from an attempt's claim (queued_at) to its command's
// first line, when a standby agent takes it vs when a fresh agent is spawned for it. Two
// standalones in the same run, one with standby agents and one without, alternate one-task runs.
import {
  BASELINE_ENV,
  describeFailure,
  log,
  ms,
  ratio,
  sequentialSpawnStats,
  sleep,
  startStandalone,
  summary,
  taskLogs,
  tempDir,
  triggerRun,
  waitForRun,
  writeDag,
} from './lib.mjs';

const DAG_ID = 'bench_start';
const TASK_ID = 'only';
/** Between runs, so the standby pool is refilled (its new agents booted) before the next claim. */
const SETTLE_MS = 400;

export const description =
  'one-task runs alternating between a standalone with standby agents and one without: claim (queued_at) → the command’s printed start (date +%s%3N)';

export async function run({ quick }) {
  const runs = quick ? 3 : 20;
  const spawns = quick ? 5 : 20;

  log(`attempt_start_latency: baseline: ${spawns} sequential spawns of node -e 0`);
  const node = await sequentialSpawnStats(process.execPath, ['-e', '0'], spawns);

  const dags = tempDir('leoflow-bench-dags-');
  writeDag(
    dags.dir,
    DAG_ID,
    `dag_id: ${DAG_ID}\nschedule: null\ntasks:\n  - task_id: ${TASK_ID}\n    type: bash\n    command: date +%s%3N\n`,
  );
  const variants = [
    { name: 'standby', standbyAgents: 2 },
    { name: 'fresh', standbyAgents: 0 },
  ];
  const started = [];
  try {
    for (const v of variants) {
      v.sa = await startWith(
        { LEOFLOW_EXECUTION_STANDBY_AGENTS: String(v.standbyAgents) },
        { dagsFolder: dags.dir, label: `start-${v.name}` },
      );
      started.push(v.sa);
      v.samples = [];
    }
    // standby agents boot once the agent port listens; let them connect before the first claim
    await sleep(SETTLE_MS * 2);
    for (let r = 0; r < runs; r++) {
      // ABBA order, so a drift in machine load weighs on both variants alike
      const order = r % 2 === 0 ? variants : [...variants].reverse();
      for (const v of order) {
        const runId = `start_${r + 1}`;
        await triggerRun(v.sa, DAG_ID, runId);
        const detail = await waitForRun(v.sa, DAG_ID, runId, { timeoutMs: 60_000, pollMs: 50 });
        if (detail.run.state !== 'success') throw new Error(describeFailure(detail, v.sa));
        v.samples.push(await sample(v.sa, runId, detail));
        await sleep(SETTLE_MS);
      }
      log(`attempt_start_latency: run ${r + 1}/${runs} done`);
    }
  } finally {
    for (const sa of started) await sa.stop();
    await dags.remove();
  }

  const col = (rows, k) => rows.map((p) => p[k]).filter((x) => x !== null && Number.isFinite(x));
  const result = {};
  for (const v of variants) {
    result[v.name] = {
      standby_agents: v.standbyAgents,
      attempts: v.samples.length,
      claim_to_command_ms: summary(col(v.samples, 'claimToCommand')),
      claim_to_registered_ms: summary(col(v.samples, 'claimToRegistered')),
      registered_to_command_ms: summary(col(v.samples, 'registeredToCommand')),
    };
  }
  const p50 = (name) => result[name].claim_to_command_ms.p50;
  return {
    description,
    runs,
    ...result,
    baseline: { spawn_env: Object.keys(BASELINE_ENV).join(', '), node_spawn_ms: node },
    standby_to_fresh_p50_ratio: ratio(p50('standby'), p50('fresh')),
    standby_p50_ratio_to_node_spawn: ratio(p50('standby'), node.p50),
    fresh_p50_ratio_to_node_spawn: ratio(p50('fresh'), node.p50),
    note: 'figures from a loaded machine lie; compare the same-run ratios, take absolute figures on a quiet one',
  };
}

async function sample(sa, runId, detail) {
  const ti = detail.task_instances.find((t) => t.task_id === TASK_ID);
  const lines = await taskLogs(sa, DAG_ID, runId, TASK_ID);
  const printed = lines.find((l) => l.stream === 'stdout' && /^\d{13}$/.test(l.message.trim()));
  if (!printed) throw new Error(`${runId}: no printed start time in the logs`);
  const at = Number(printed.message.trim());
  const queued = ms(ti.queued_at);
  const registered = ms(ti.started_at);
  return {
    claimToCommand: at - queued,
    claimToRegistered: registered - queued,
    registeredToCommand: at - registered,
  };
}

/**
 * startStandalone passes this process's env on: the variant's settings (and a free metrics port,
 * so parallel standalones do not collide on 9464) are set only while it spawns.
 */
async function startWith(env, opts) {
  const all = { LEOFLOW_METRICS_PORT: '0', ...env };
  const saved = Object.fromEntries(Object.keys(all).map((k) => [k, process.env[k]]));
  Object.assign(process.env, all);
  let starting;
  try {
    starting = startStandalone(opts); // spawns synchronously, before its first await
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  return starting;
}
