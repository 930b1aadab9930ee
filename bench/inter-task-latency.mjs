// inter_task_latency: how long after the control plane records an upstream's success does the
// downstream's command start? A chain of no-op bash tasks, each printing `date +%s%3N` first.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  REPO,
  describeFailure,
  log,
  ms,
  nodeJson,
  ratio,
  sequentialSpawnStats,
  BASELINE_ENV,
  startStandalone,
  summary,
  taskLogs,
  tempDir,
  triggerRun,
  waitForRun,
  writeDag,
} from './lib.mjs';

// Issue 15: a standby agent gets its spec with its token, so nothing but the task's own start
// stands between an upstream's success and the downstream's first line.
const TARGET_P50_MS = 25;
/** 25 ms against the 60 ms node spawn of the machine the goal was set on */
const TARGET_P50_RATIO_TO_NODE_SPAWN = Math.round((25 / 60) * 100) / 100;
const DAG_ID = 'bench_chain';

export const description =
  'chain of no-op bash tasks: downstream printed start (date +%s%3N) minus upstream ended_at';

export async function run({ quick }) {
  const chainLength = quick ? 6 : 20;
  const runs = quick ? 1 : 3;
  const spawns = quick ? 8 : 30;

  // --- baselines, same run -------------------------------------------------------------------
  log(
    `inter_task_latency: baseline: ${spawns} sequential spawns each of node -e 0, bash -c true, agent cold start`,
  );
  const node = await sequentialSpawnStats(process.execPath, ['-e', '0'], spawns);
  const bash = await sequentialSpawnStats('bash', ['-c', 'true'], spawns);
  // The agent entry with an empty environment loads every module it needs, fails its config
  // check and exits 2: node boot + module loading, no RPC. Profiling aid, not the baseline.
  const agentCold = await sequentialSpawnStats(
    process.execPath,
    [join(REPO, 'packages/agent/dist/main.js')],
    Math.min(spawns, 15),
    {
      env: {},
      okCodes: [2],
    },
  );

  // Profiling aid: the same entry bundled into one file (as packages/agent's `bundle` script
  // does, built into a temp dir here), to separate module resolution/loading from the rest.
  const agentBundled = await bundledAgentColdStart(Math.min(spawns, 15));

  // --- the chain -----------------------------------------------------------------------------
  const dags = tempDir('leoflow-bench-dags-');
  const tasks = [];
  for (let i = 0; i < chainLength; i++) {
    const id = taskId(i);
    tasks.push(
      `  - task_id: ${id}\n    type: bash\n    command: date +%s%3N\n` +
        (i > 0 ? `    depends_on: [${taskId(i - 1)}]\n` : ''),
    );
  }
  writeDag(dags.dir, DAG_ID, `dag_id: ${DAG_ID}\nschedule: null\ntasks:\n${tasks.join('')}`);

  const sa = await startStandalone({ dagsFolder: dags.dir, label: 'latency' });
  const pairs = [];
  const upstreamTails = [];
  const probeRuns = [];
  try {
    for (let r = 0; r < runs; r++) {
      const runId = `chain_${r + 1}`;
      log(`inter_task_latency: run ${r + 1}/${runs} (${chainLength} tasks)`);
      await triggerRun(sa, DAG_ID, runId);
      const detail = await waitForRun(sa, DAG_ID, runId, {
        timeoutMs: 30_000 + chainLength * 10_000,
        pollMs: 250,
      });
      if (detail.run.state !== 'success') throw new Error(describeFailure(detail, sa));
      const diag = readAgentDiagnostics(sa.dataDir, runId);
      const byTask = new Map(detail.task_instances.map((ti) => [ti.task_id, ti]));
      const marks = [];
      for (let i = 0; i < chainLength; i++) {
        const id = taskId(i);
        const ti = byTask.get(id);
        const lines = await taskLogs(sa, DAG_ID, runId, id);
        const printed = lines.find(
          (l) => l.stream === 'stdout' && /^\d{13}$/.test(l.message.trim()),
        );
        if (!printed) throw new Error(`${runId}/${id}: no printed start time in the logs`);
        const spawnLine = lines.find(
          (l) => l.stream === 'agent' && /^started \S+ process/.test(l.message),
        );
        const exitLine = lines.find((l) => l.stream === 'agent' && /^task exited/.test(l.message));
        marks.push({
          ended: ms(ti.ended_at),
          queued: ms(ti.queued_at),
          registered: ms(ti.started_at),
          agentSpawning: diag.get(id)?.createdAt ?? null,
          specReceived: diag.get(id)?.specAt ?? null,
          standbyReady: diag.get(id)?.standbyReadyAt ?? null,
          spawned: spawnLine ? ms(spawnLine.time) : null,
          printed: Number(printed.message.trim()),
          exited: exitLine ? ms(exitLine.time) : null,
        });
      }
      for (let i = 1; i < chainLength; i++) {
        const up = marks[i - 1];
        const down = marks[i];
        pairs.push({
          // taken by a standby agent that was connected and waiting when it was claimed
          readyStandby: down.standbyReady !== null && down.standbyReady <= down.queued,
          latency: down.printed - up.ended,
          // Leoflow's part of the hop, up to the agent's spawn() of the task returning …
          toTaskSpawned: down.spawned === null ? null : down.spawned - up.ended,
          scheduler: down.queued - up.ended,
          agentStartRegister: down.registered - down.queued,
          queuedToSpawn: down.agentSpawning === null ? null : down.agentSpawning - down.queued,
          spawnToRegistered:
            down.agentSpawning === null ? null : down.registered - down.agentSpawning,
          registeredToCommand: down.printed - down.registered,
          registeredToSpec: down.specReceived === null ? null : down.specReceived - down.registered,
          specToSpawn:
            down.specReceived === null || down.spawned === null
              ? null
              : down.spawned - down.specReceived,
          spawnToPrinted: down.spawned === null ? null : down.printed - down.spawned,
        });
      }
      for (const m of marks) {
        upstreamTails.push({
          taskExitToRecorded: m.exited === null ? null : m.ended - m.exited,
          printedToRecorded: m.ended - m.printed,
        });
      }
    }
    // Profiling aid: a fresh process loading the agent's RPC stack and making refused calls to
    // this agent port splits "agent spawn → registered" into boot, module load and first RPC.
    const probes = quick ? 5 : 15;
    log(`inter_task_latency: ${probes} first-RPC probes against the agent port`);
    for (let i = 0; i < probes; i++) {
      probeRuns.push(await nodeJson(join(REPO, 'bench/probe-first-rpc.mjs'), [sa.agentUrl]));
    }
  } finally {
    await sa.stop();
    await dags.remove();
  }

  const col = (rows, k) => rows.map((p) => p[k]).filter((x) => x !== null && Number.isFinite(x));
  const lat = summary(col(pairs, 'latency'));
  const ready = pairs.filter((p) => p.readyStandby);
  const breakdown = {
    scheduler_report_to_queued: summary(col(pairs, 'scheduler')),
    queued_to_agent_registered: summary(col(pairs, 'agentStartRegister')),
    queued_to_agent_registered_split: {
      queued_to_agent_spawn: summary(col(pairs, 'queuedToSpawn')),
      agent_spawn_to_registered: summary(col(pairs, 'spawnToRegistered')),
    },
    registered_to_command_started: summary(col(pairs, 'registeredToCommand')),
    registered_to_command_started_split: {
      register_to_spec_received: summary(col(pairs, 'registeredToSpec')),
      spec_to_task_spawned: summary(col(pairs, 'specToSpawn')),
      task_spawned_to_printed: summary(col(pairs, 'spawnToPrinted')),
    },
  };
  const p50Share = (k) => ratio(breakdown[k].p50, lat.p50);
  return {
    description,
    chain_length: chainLength,
    runs,
    pairs: pairs.length,
    latency_ms: lat,
    // A chain hop faster than a standby agent's boot drains the pool (2 by default): those hops
    // meet an agent still starting. Read latency_ms beside this share.
    ready_standby_hops: { hops: pairs.length, ready: ready.length },
    latency_ms_ready_standby: summary(col(ready, 'latency')),
    // … and the task's own start after it (bash, then `date`, under the attempt's uid): the
    // issue's goal leaves only the latter between an upstream's success and the first line
    latency_ms_ready_standby_split: {
      upstream_success_to_task_spawned: summary(col(ready, 'toTaskSpawned')),
      task_spawned_to_printed: summary(col(ready, 'spawnToPrinted')),
    },
    breakdown_ms: breakdown,
    breakdown_share_of_p50: {
      scheduler_report_to_queued: p50Share('scheduler_report_to_queued'),
      queued_to_agent_registered: p50Share('queued_to_agent_registered'),
      registered_to_command_started: p50Share('registered_to_command_started'),
    },
    // after the upstream's command exits, before its success is recorded (not part of latency_ms,
    // but part of what a user sees between two tasks)
    upstream_tail_ms: {
      task_exit_to_success_recorded: summary(col(upstreamTails, 'taskExitToRecorded')),
      printed_start_to_success_recorded: summary(col(upstreamTails, 'printedToRecorded')),
    },
    baseline: {
      spawn_env: `${Object.keys(BASELINE_ENV).join(', ')} only (what the executor passes an agent)`,
      node_spawn_ms: node,
      bash_spawn_ms: bash,
      agent_cold_start_ms: {
        ...agentCold,
        note: 'node packages/agent/dist/main.js with an empty env: boot + module load, exits 2 before any RPC',
      },
      agent_bundled_cold_start_ms: agentBundled,
      first_rpc_probe_ms: {
        n: probeRuns.length,
        boot: summary(probeRuns.map((p) => p.boot_ms)),
        module_load: summary(probeRuns.map((p) => p.module_load_ms)),
        first_rpc: summary(probeRuns.map((p) => p.first_rpc_ms)),
        warm_rpc: summary(probeRuns.map((p) => p.warm_rpc_ms)),
        total: summary(probeRuns.map((p) => p.total_ms)),
        note: 'bench/probe-first-rpc.mjs: fresh node loading @connectrpc/connect(-node) + @leoflow/protocol, two Register calls refused as Unauthenticated (ms since process start)',
      },
    },
    p50_ratio_to_node_spawn: ratio(lat.p50, node.p50),
    p50_ratio_to_bash_spawn: ratio(lat.p50, bash.p50),
    agent_cold_start_ratio_to_node_spawn: ratio(agentCold.p50, node.p50),
    agent_bundled_cold_start_ratio_to_node_spawn: ratio(agentBundled.p50 ?? null, node.p50),
    // The goal was set as 25 ms on a machine where one bare `node` spawn took 60 ms (issue 15):
    // as a ratio to the same run's node spawn, which travels between machines, that is 0.42.
    target: {
      p50_ms_max: TARGET_P50_MS,
      p50_ratio_to_node_spawn_max: TARGET_P50_RATIO_TO_NODE_SPAWN,
    },
    meets_target: lat.p50 !== null && lat.p50 <= TARGET_P50_MS,
    meets_target_ratio:
      lat.p50 !== null && node.p50 !== null && lat.p50 / node.p50 <= TARGET_P50_RATIO_TO_NODE_SPAWN,
  };
}

/** Cold start of the agent bundled with esbuild (a profiling what-if; null when esbuild is absent). */
async function bundledAgentColdStart(n) {
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    return { skipped: 'esbuild is not installed' };
  }
  const out = tempDir('leoflow-bench-bundle-');
  try {
    const outfile = join(out.dir, 'leoflow-agent.cjs');
    // the options of packages/agent's bundle (bundle/build.mjs), minus its predecoding and code
    // cache: CommonJS, the Headers shim, ws's optional native add-ons left out
    await esbuild.build({
      absWorkingDir: join(REPO, 'packages/agent'),
      entryPoints: ['src/main.ts'],
      bundle: true,
      inject: ['src/bundle-globals.ts'],
      external: ['bufferutil', 'utf-8-validate'],
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      conditions: ['source'],
      outfile,
      logLevel: 'silent',
    });
    const stats = await sequentialSpawnStats(process.execPath, [outfile], n, {
      env: {},
      okCodes: [2],
    });
    return {
      ...stats,
      bytes: statSync(outfile).size,
      note: 'packages/agent src/main.ts bundled by esbuild into one file (temp dir), same empty-env exit 2: what module loading costs',
    };
  } catch (err) {
    return { skipped: `bundle failed: ${String(err?.message ?? err).slice(0, 300)}` };
  } finally {
    await out.remove();
  }
}

function taskId(i) {
  return `t${String(i).padStart(2, '0')}`;
}

/**
 * The executor creates <data-dir>/agents/<attempt>.log just before it spawns the agent (its birth
 * time marks the spawn; a standby agent's file is older than its attempt, so that split is only
 * meaningful for cold agents), and the agent writes one line there once it knows its spec: right
 * after Register answered when the spec came on the pipe, after GetTaskSpec otherwise:
 * `<iso> leoflow-agent[pid] info task <dag>/<run>/<task> try <n> (<type>)`.
 * A standby agent also writes `… info standby: ready; …` once it is connected and waiting.
 * Returns task_id → { createdAt, specAt, standbyReadyAt } (epoch ms) for one run.
 */
function readAgentDiagnostics(dataDir, runId) {
  const out = new Map();
  const dir = join(dataDir, 'agents');
  let files = [];
  try {
    files = readdirSync(dir).slice(0, 10_000);
  } catch {
    return out;
  }
  const re = new RegExp(
    `^(\\S+) leoflow-agent\\[\\d+\\] info task ${DAG_ID}/${escape(runId)}/(\\S+) try \\d+ `,
    'm',
  );
  for (const f of files) {
    let text;
    try {
      text = readFileSync(join(dir, f), 'utf8');
    } catch {
      continue;
    }
    const m = re.exec(text);
    if (!m) continue;
    const ready = /^(\S+) leoflow-agent\[\d+\] info standby: ready/m.exec(text);
    let createdAt = null;
    try {
      const st = statSync(join(dir, f));
      // birth time where the filesystem records it (ext4, xfs, btrfs, tmpfs on recent kernels)
      if (st.birthtimeMs > 0) createdAt = Math.round(st.birthtimeMs);
    } catch {
      // gone
    }
    out.set(m[2], {
      createdAt,
      specAt: Date.parse(m[1]),
      standbyReadyAt: ready ? Date.parse(ready[1]) : null,
    });
  }
  return out;
}

function escape(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
