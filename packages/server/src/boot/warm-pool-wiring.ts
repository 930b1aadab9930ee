import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import { AssignmentBroker } from '../executor/assignments/assignment-broker.js';
import type { Refence } from '../executor/assignments/assignment-broker.js';
import type { SigningKeyring } from '../auth/signing-keys.js';
import { WorkerTokenIssuer } from '../auth/worker-token.js';
import type { KubernetesExecutorConfig } from '../config/server-config.js';
import type { Executor } from '../executor/executor.js';
import { allowlistOf } from '../executor/kubernetes/allowlist.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type { WarmPoolMemberStore } from '../store/ports/warm-pool-members.js';
import { WarmPoolManager, type WorkerPodApi } from '../executor/warm-pools/pool-manager.js';
import { WarmRoutingExecutor } from '../executor/warm-pools/warm-routing-executor.js';
import { createWorkerStream } from '../rpc/worker-stream.js';
import { DEFAULT_KEEPALIVE_MS } from '../rpc/assignment-rpc.js';

export interface WarmPoolWiringInput {
  kubernetes: KubernetesExecutorConfig & {
    warmPools: NonNullable<KubernetesExecutorConfig['warmPools']>;
  };
  agentKeys: SigningKeyring;
  clock: Clock;
  /** the attempt fences, and the pools' members (shared by every replica) */
  store: Pick<TaskInstanceStore, 'getAttemptFence'> & WarmPoolMemberStore;
  logger: Logger;
  /** the agent URL pods dial when executor.kubernetes.agent_url is not set */
  agentUrl: string;
  heartbeatIntervalMs: number;
  refence: Refence;
  /**
   * Only the scheduling process reconciles pools: the members are stored, so every replica
   * answers exchanges and worker RPCs, but a replica that does not lead creates and deletes
   * nothing.
   */
  leading: () => boolean;
  /** tests: a shorter worker token TTL, a faster renewal check, a pod API of their own */
  workerTokenTtlSeconds?: number;
  renewCheckMs?: number;
  podApi?: WorkerPodApi;
}

/** Everything warm pools add to a control plane (execution.warm_pools_enabled and pools set). */
export interface WarmPools {
  manager: WarmPoolManager;
  /** the warm pools' own broker: a runner never waits here, a worker never in the runners' one */
  broker: AssignmentBroker;
  /** mints at the exchange and on the stream; the agent port's worker verifier */
  tokens: WorkerTokenIssuer;
  /** AwaitAssignment for a worker principal */
  stream: ReturnType<typeof createWorkerStream>;
  /** the Kubernetes executor with warm routing in front */
  route(inner: Executor): WarmRoutingExecutor;
  /** one pass: pools topped up and checked, warm attempts released, requeued or sent cold */
  reconcile(): Promise<void>;
  /** starts the reconcile timer (once agents can reach the control plane) */
  start(): void;
  close(): void;
}

export async function wireWarmPools(input: WarmPoolWiringInput): Promise<WarmPools> {
  const k8s = input.kubernetes;
  const tokens = new WorkerTokenIssuer(input.agentKeys, input.workerTokenTtlSeconds);
  let podApi = input.podApi;
  if (!podApi) {
    // Loaded on demand, like the executor: no pools, no Kubernetes client in the process.
    const { KubeConfig, CoreV1Api } = await import('@kubernetes/client-node');
    const { kubeWorkerPodApi } = await import('../executor/warm-pools/kube-worker-pod-api.js');
    const kc = new KubeConfig();
    if (k8s.kubeconfig) kc.loadFromFile(k8s.kubeconfig);
    else kc.loadFromCluster();
    podApi = kubeWorkerPodApi(kc.makeApiClient(CoreV1Api), {
      agentUrl: k8s.agentUrl ?? input.agentUrl,
      heartbeatIntervalMs: input.heartbeatIntervalMs,
      instance: k8s.instance,
      runAsUser: k8s.runAsUser,
      terminationGracePeriodSeconds: k8s.terminationGracePeriodSeconds,
      agentCa: k8s.agentCaConfigMap
        ? { configMap: k8s.agentCaConfigMap.name, key: k8s.agentCaConfigMap.key }
        : null,
    });
  }
  const manager = new WarmPoolManager(k8s.warmPools, {
    api: podApi,
    tokens,
    clock: input.clock,
    store: input.store,
  });
  const onError = (what: string) => (err: unknown) => input.logger.error({ err }, what);
  const broker = new AssignmentBroker(input.clock, {
    onMintError: onError('minting a warm-pool attempt token failed'),
    refence: input.refence,
    onRefenceError: onError('fencing a requeued warm-pool assignment failed'),
  });
  const stream = createWorkerStream({
    broker,
    manager,
    tokens,
    clock: input.clock,
    keepaliveMs: DEFAULT_KEEPALIVE_MS,
    leading: input.leading,
    ...(input.renewCheckMs !== undefined ? { renewCheckMs: input.renewCheckMs } : {}),
    onError: onError('a warm-pool worker stream failed'),
  });
  let routing: WarmRoutingExecutor | null = null;
  let timer: NodeJS.Timeout | null = null;
  // One pass at a time: a caller (the timer, a test) waits for the pass in flight, then runs.
  let last: Promise<void> = Promise.resolve();
  const reconcile = () => {
    const pass = last.then(async () => {
      if (!input.leading()) return;
      await routing?.reconcile();
      // the attempts the routing released end their workers (idle, or recycled) first
      await manager.settled();
      await manager.reconcile();
    });
    last = pass.catch(() => undefined);
    return pass;
  };
  return {
    manager,
    broker,
    tokens,
    stream,
    route(inner) {
      routing = new WarmRoutingExecutor({
        inner,
        broker,
        manager,
        store: input.store,
        placement: (tenantId) => {
          const t = k8s.tenants[tenantId];
          return t
            ? { namespace: t.namespace, allowlist: allowlistOf(t, k8s.agentImage) }
            : undefined;
        },
        onError: onError('a warm-pool cold fallback failed'),
      });
      return routing;
    },
    reconcile,
    start() {
      if (timer) return;
      timer = setInterval(() => {
        reconcile().catch(onError('a warm-pool reconcile failed'));
      }, k8s.warmPoolReconcileIntervalMs ?? 5_000);
      timer.unref();
      reconcile().catch(onError('a warm-pool reconcile failed'));
    },
    close() {
      if (timer) clearInterval(timer);
      timer = null;
    },
  };
}
