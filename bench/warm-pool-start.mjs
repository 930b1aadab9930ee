// warm_pool_start: attempt start latency under the exchange transport, a warm worker pool vs a
// cold pod per attempt, through the kube-apiserver double and its kubelet simulator (both in this
// process; see kube-bench.mjs). Both standalones run the same one-task bash DAG one run at a time
// with auth.agent_token_transport=exchange and liveness enforce; the warm one also has
// execution.warm_pools_enabled and one pool (min_idle 1) for the default tenant. "claim →
// registered" is the task instance's queued_at → started_at (the attempt's Register), which for
// a cold pod includes the pod's create, its start and the exchange; for a warm one, the
// assignment on the worker's stream, its ack and the attempt agent's Register. The bench waits
// for the pool's first worker before timing, as a platform would have it warm.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AGENT_IMAGE,
  NAMESPACE,
  SERVICE_ACCOUNT,
  measureRuns,
  startCluster,
  withEnv,
} from './kube-bench.mjs';
const WORKER_POOL_ANNOTATION = 'leoflow.io/worker-pool';
import { log, ratio, startStandalone, summary, tempDir, writeDag } from './lib.mjs';

const DAG_ID = 'bench_warm';
// Between runs (both sides alike): the worker removes what its attempt left and re-opens its
// stream before it is free for the next one.
const PAUSE_MS = 500;
const EXCHANGE_ENV = {
  LEOFLOW_EXECUTION_STANDBY_AGENTS: '0',
  LEOFLOW_AUTH_AGENT_TOKEN_TRANSPORT: 'exchange',
  LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'enforce',
};

export const description =
  'one-task runs under the exchange transport: claim → registered with a warm worker pool vs a cold pod per attempt (apiserver double + kubelet simulator)';

export async function run({ quick }) {
  const attempts = quick ? 3 : 20;
  const dags = tempDir('leoflow-bench-warm-dags-');
  writeDag(
    dags.dir,
    DAG_ID,
    `dag_id: ${DAG_ID}\nschedule: null\ntasks:\n  - task_id: start\n    type: bash\n    command: "true"\n`,
  );

  log(`warm_pool_start: cold pods (exchange), ${attempts} runs`);
  const cold = await startCluster();
  const coldSa = await withEnv({ ...EXCHANGE_ENV, LEOFLOW_CONFIG_FILE: cold.configFile }, () =>
    startStandalone({ dagsFolder: dags.dir, label: 'warm-cold' }),
  );
  const coldRuns = await measureRuns(coldSa, DAG_ID, attempts, 'cold', undefined, PAUSE_MS);
  await coldSa.stop();

  log(`warm_pool_start: warm pool (exchange), ${attempts} runs`);
  const warm = await startCluster({
    kubernetes: {
      warm_pools: [
        {
          tenant: 'default',
          service_account: SERVICE_ACCOUNT,
          image: AGENT_IMAGE,
          min_idle: 1,
          max_size: 2,
          max_attempts_per_worker: attempts + 10,
        },
      ],
    },
  });
  const warmSa = await withEnv(
    {
      ...EXCHANGE_ENV,
      LEOFLOW_EXECUTION_WARM_POOLS_ENABLED: 'true',
      LEOFLOW_CONFIG_FILE: warm.configFile,
    },
    () => startStandalone({ dagsFolder: dags.dir, label: 'warm-pool' }),
  );
  await waitForWorker(warm, warmSa);
  const podsBefore = warm.podsCreated.count;
  const warmRuns = await measureRuns(warmSa, DAG_ID, attempts, 'warm', undefined, PAUSE_MS);
  const podsDuring = warm.podsCreated.count - podsBefore;
  await warmSa.stop();

  const c = summary(coldRuns.map((a) => a.registered - a.queued));
  const w = summary(warmRuns.map((a) => a.registered - a.queued));
  return {
    description,
    attempts,
    cold_pod: { claim_to_registered_ms: c },
    warm_pool: { claim_to_registered_ms: w, pods_created_while_measuring: podsDuring },
    ratio_warm_to_cold: { p50: ratio(w.p50, c.p50), p95: ratio(w.p95, c.p95) },
    // Every attempt ran on both; the warm ones on pods that were already there (the pool's size
    // was enough, so none had to be created while measuring).
    meets_target: coldRuns.length === attempts && warmRuns.length === attempts && podsDuring === 0,
  };
}

/**
 * Waits until one of the pool's pods runs (its worker then exchanges its token and waits on its
 * stream), then runs one untimed attempt, so the measured ones meet a worker that is warm.
 */
async function waitForWorker(cluster, sa) {
  const until = Date.now() + 60_000;
  const running = () =>
    cluster.double.store
      .list(cluster.double.api.type('', 'pods'), NAMESPACE)
      .some(
        (p) =>
          p.metadata?.annotations?.[WORKER_POOL_ANNOTATION] !== undefined &&
          p.status?.phase === 'Running',
      );
  while (!running()) {
    if (Date.now() > until) throw new Error('warm_pool_start: no pool pod ran within 60 s');
    await sleep(100);
  }
  await measureRuns(sa, DAG_ID, 1, 'warmup');
}
