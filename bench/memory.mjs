// memory: peak RSS (VmHWM) of an idle standalone with the examples loaded, and of one agent
// while its task runs, beside a plain node process that just waits.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import {
  REPO,
  agentPids,
  describeFailure,
  log,
  onCleanup,
  procMem,
  ratio,
  round,
  sleep,
  startStandalone,
  tempDir,
  triggerRun,
  waitForRun,
  writeDag,
} from './lib.mjs';

const TARGET_STANDALONE_MB = 200;
const TARGET_AGENT_MB = 80;
const DAG_ID = 'bench_sleeper';

export const description =
  'VmHWM of standalone idle with examples/dags loaded, and max VmHWM/VmRSS of one agent while its task sleeps';

const mb = (kb) => (kb === null || kb === undefined ? null : round(kb / 1024, 1));

export async function run({ quick }) {
  const idleMs = quick ? 2_000 : 5_000;
  const sleepS = quick ? 2 : 3;

  // --- baseline: a node process that only waits ---------------------------------------------
  log('memory: baseline: node -e "setTimeout(()=>{},2000)"');
  const baseline = await nodeIdlePeak();

  // --- standalone, idle, examples loaded -------------------------------------------------------
  log(`memory: standalone with examples/dags, idle ${idleMs} ms`);
  const idle = await startStandalone({
    dagsFolder: join(REPO, 'examples/dags'),
    label: 'memory-idle',
  });
  let standalone;
  try {
    await sleep(idleMs);
    standalone = procMem(idle.pid);
    if (!standalone) throw new Error('standalone exited during the idle period');
  } finally {
    await idle.stop();
  }

  // --- one agent, sampled every 100 ms while its task sleeps --------------------------------
  log(`memory: one agent whose task sleeps ${sleepS} s`);
  const dags = tempDir('leoflow-bench-dags-');
  writeDag(
    dags.dir,
    DAG_ID,
    `dag_id: ${DAG_ID}\nschedule: null\ntasks:\n  - task_id: sleeper\n    type: bash\n    command: sleep ${sleepS}\n`,
  );
  const sa = await startStandalone({ dagsFolder: dags.dir, label: 'memory-agent' });
  const agent = { pid: null, samples: 0, hwm_kb: null, rss_kb: null };
  let standaloneAfter;
  try {
    await triggerRun(sa, DAG_ID, 'sleeper_1');
    const deadline = Date.now() + 30_000 + sleepS * 1000;
    // find the agent running the task: a child of this standalone running the agent entry that
    // has a child of its own (standby agents, pre-started and waiting, have none)
    while (agent.pid === null && Date.now() < deadline) {
      agent.pid = agentPids(sa.pid, { withChildren: true })[0] ?? null;
      if (agent.pid === null) await sleep(50);
    }
    if (agent.pid === null) throw new Error('no agent process appeared');
    while (Date.now() < deadline) {
      const m = procMem(agent.pid);
      if (!m || m.hwm_kb === null) break; // exited (or a zombie awaiting its parent)
      agent.samples++;
      agent.hwm_kb = Math.max(agent.hwm_kb ?? 0, m.hwm_kb ?? 0);
      agent.rss_kb = Math.max(agent.rss_kb ?? 0, m.rss_kb ?? 0);
      await sleep(100);
    }
    const d = await waitForRun(sa, DAG_ID, 'sleeper_1', { timeoutMs: 30_000 });
    if (d.run.state !== 'success') throw new Error(describeFailure(d, sa));
    standaloneAfter = procMem(sa.pid);
  } finally {
    await sa.stop();
    await dags.remove();
  }

  const standaloneMb = mb(standalone.hwm_kb);
  const agentMb = mb(agent.hwm_kb);
  const baseMb = mb(baseline.hwm_kb);
  return {
    description,
    standalone: {
      idle_ms: idleMs,
      vm_hwm_mb: standaloneMb,
      vm_rss_mb: mb(standalone.rss_kb),
      vm_hwm_mb_after_one_run: standaloneAfter ? mb(standaloneAfter.hwm_kb) : null,
    },
    agent: {
      task_sleep_s: sleepS,
      samples: agent.samples,
      vm_hwm_mb: agentMb,
      vm_rss_max_mb: mb(agent.rss_kb),
    },
    baseline: {
      node_idle: { vm_hwm_mb: baseMb, vm_rss_mb: mb(baseline.rss_kb), samples: baseline.samples },
    },
    standalone_ratio_to_node: ratio(standaloneMb, baseMb),
    agent_ratio_to_node: ratio(agentMb, baseMb),
    target: { standalone_mb_max: TARGET_STANDALONE_MB, agent_mb_max: TARGET_AGENT_MB },
    meets_target:
      standaloneMb !== null &&
      agentMb !== null &&
      standaloneMb <= TARGET_STANDALONE_MB &&
      agentMb <= TARGET_AGENT_MB,
    meets_target_detail: {
      standalone: standaloneMb !== null && standaloneMb <= TARGET_STANDALONE_MB,
      agent: agentMb !== null && agentMb <= TARGET_AGENT_MB,
    },
  };
}

/** Peak RSS of `node -e "setTimeout(()=>{},2000)"`, sampled every 100 ms until it exits. */
async function nodeIdlePeak() {
  const p = spawn(process.execPath, ['-e', 'setTimeout(()=>{},2000)'], { stdio: 'ignore' });
  const exited = new Promise((r) => p.once('exit', () => r()));
  const kill = onCleanup(async () => {
    if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    await exited;
  });
  const out = { hwm_kb: null, rss_kb: null, samples: 0 };
  try {
    const deadline = Date.now() + 10_000;
    while (p.exitCode === null && p.signalCode === null && Date.now() < deadline) {
      const m = p.pid !== undefined ? procMem(p.pid) : null;
      if (m && m.hwm_kb !== null) {
        out.samples++;
        out.hwm_kb = Math.max(out.hwm_kb ?? 0, m.hwm_kb);
        out.rss_kb = Math.max(out.rss_kb ?? 0, m.rss_kb ?? 0);
      }
      await sleep(100);
    }
  } finally {
    await kill();
  }
  if (out.hwm_kb === null) throw new Error('could not sample the baseline node process');
  return out;
}
