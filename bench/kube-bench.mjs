// What the Kubernetes benchmarks share: the kube-apiserver double and a kubelet simulator in this
// process (the agent image mapped to the built agent, packages/server/test/support/
// agent-image-entrypoint.mjs), a config file naming them, and one-task runs measured one at a time.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startKubeDouble, startKubelet, ADMIN_USER } from '../packages/kube-double/dist/index.js';
import { REPO, describeFailure, ms, onCleanup, tempDir, triggerRun, waitForRun } from './lib.mjs';

export const NAMESPACE = 'leoflow-bench';
export const AGENT_IMAGE = 'leoflow-agent:bench';
export const SERVICE_ACCOUNT = 'leoflow-task';
const RUN_LABEL = 'leoflow.io/run-id';
const ENTRYPOINT = join(REPO, 'packages/server/test/support/agent-image-entrypoint.mjs');

/**
 * The double and a kubelet simulator, and a config file for `executor.default: kubernetes`.
 * `kubernetes` is merged into executor.kubernetes (e.g. warm_pools); `podCreatedAt` maps a run id
 * to when the apiserver stored that run's pod.
 */
export async function startCluster({ kubernetes = {} } = {}) {
  const dir = tempDir('leoflow-bench-kube-');
  const double = await startKubeDouble();
  const admin = double.api.context(ADMIN_USER);
  double.api.createObject(
    double.api.type('', 'namespaces'),
    undefined,
    { metadata: { name: NAMESPACE } },
    admin,
  );
  double.api.createObject(
    double.api.type('', 'serviceaccounts'),
    NAMESPACE,
    { metadata: { name: SERVICE_ACCOUNT } },
    admin,
  );
  const podCreatedAt = new Map();
  const podsCreated = { count: 0 };
  double.store.watchFrom(double.store.currentRevision(), (ev) => {
    if (ev.resourceType.resource !== 'pods' || ev.type !== 'ADDED') return;
    podsCreated.count++;
    const run = ev.object.metadata?.labels?.[RUN_LABEL];
    if (run) podCreatedAt.set(run, Date.now());
  });
  const kubelet = startKubelet({
    double,
    nodeName: 'bench-node',
    workRoot: join(dir.dir, 'kubelet'),
    imageMap: { [AGENT_IMAGE]: { entrypoint: [process.execPath, ENTRYPOINT] } },
    allocatable: { cpu: '16', memory: '64Gi' },
    tickIntervalMs: 100,
  });
  onCleanup(async () => {
    await kubelet.stop();
    await double.close();
  });
  const kubeconfig = double.kubeconfig(dir.dir);
  const configFile = join(dir.dir, 'config.yaml');
  writeFileSync(
    configFile,
    JSON.stringify({
      executor: {
        default: 'kubernetes',
        kubernetes: {
          kubeconfig,
          agent_image: AGENT_IMAGE,
          instance: 'bench',
          termination_grace_period: 5,
          tenants: { default: { namespace: NAMESPACE, service_accounts: [SERVICE_ACCOUNT] } },
          ...kubernetes,
        },
      },
    }),
  );
  return { configFile, podCreatedAt, podsCreated, double };
}

/**
 * Runs `attempts` one-task runs one after another; the timestamps of each attempt's start.
 * `pauseMs` waits between runs (a warm worker cleans up after its attempt before it is free).
 */
export async function measureRuns(sa, dagId, attempts, prefix, podCreatedAt, pauseMs = 0) {
  const out = [];
  for (let i = 0; i < attempts; i++) {
    if (i > 0 && pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    const runId = `${prefix}_${i}`;
    await triggerRun(sa, dagId, runId);
    const detail = await waitForRun(sa, dagId, runId, { timeoutMs: 60_000, pollMs: 100 });
    if (detail.run.state !== 'success') throw new Error(describeFailure(detail, sa));
    const ti = detail.task_instances[0];
    const entry = { queued: ms(ti.queued_at), registered: ms(ti.started_at) };
    if (podCreatedAt) {
      const at = podCreatedAt.get(runId);
      if (at === undefined) throw new Error(`${runId}: no pod was created`);
      entry.podCreated = at;
    }
    out.push(entry);
  }
  return out;
}

/** Runs `fn` with extra environment (the standalone it spawns inherits it), then restores it. */
export async function withEnv(extra, fn) {
  const saved = Object.fromEntries(Object.keys(extra).map((k) => [k, process.env[k]]));
  Object.assign(process.env, extra);
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
