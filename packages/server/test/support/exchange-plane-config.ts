import { join } from 'node:path';
import { defaultServerConfig, type ServerConfig } from '../../src/config/server-config.js';
import type { WarmPoolConfig } from '../../src/config/warm-pool-config.js';

export interface ExchangePlaneOptions {
  /** the data directory's parent (a test cluster's dir, a scratch dir) */
  dir: string;
  /** the kubeconfig the control plane uses; null: no Kubernetes executor at all */
  kubeconfig: string | null;
  image: string;
  instance: string;
  /** tenant → the namespace its attempt pods run in */
  tenants: Record<string, string>;
  /** the one service account every tenant runs tasks as */
  serviceAccount: string;
  /** the images a task may choose (empty: the executor's agent image only) */
  images?: string[];
  podStartTimeoutMs?: number;
  terminationGracePeriodSeconds?: number;
  /** warm pools (also turns execution.warm_pools_enabled on), reconciled every interval */
  warmPools?: { pools: WarmPoolConfig[]; reconcileIntervalMs: number };
}

/**
 * A control plane under auth.agent_token_transport=exchange on the Kubernetes executor, on
 * ephemeral loopback ports (metrics included), heartbeat 1 s, scheduler tick 50 ms: the shape the exchange and
 * warm-pool tests share. A test sets what is its own (liveness, scoping, the bootstrap) on the
 * result.
 */
export function exchangePlaneConfig(o: ExchangePlaneOptions): ServerConfig {
  const cfg = defaultServerConfig(join(o.dir, 'data'));
  cfg.http.port = 0;
  cfg.agent.port = 0;
  cfg.metrics.port = 0;
  cfg.execution.heartbeatIntervalMs = 1_000;
  cfg.execution.schedulerTickMs = 50;
  cfg.credentials.agentTokenTransport = 'exchange';
  if (o.kubeconfig === null) return cfg;
  cfg.defaultExecutor = 'kubernetes';
  cfg.kubernetes = {
    kubeconfig: o.kubeconfig,
    agentImage: o.image,
    agentUrl: null,
    podStartTimeoutMs: o.podStartTimeoutMs ?? 30_000,
    instance: o.instance,
    runAsUser: 65532,
    terminationGracePeriodSeconds: o.terminationGracePeriodSeconds ?? 5,
    agentCaConfigMap: null,
    keepFinishedPods: true,
    tenants: Object.fromEntries(
      Object.entries(o.tenants).map(([tenant, namespace]) => [
        tenant,
        {
          namespace,
          images: o.images ?? [],
          serviceAccounts: [o.serviceAccount],
          maxResources: { cpu: '1', memory: '1Gi' },
          defaultResources: {},
        },
      ]),
    ),
  };
  if (o.warmPools) {
    cfg.credentials.warmPoolsEnabled = true;
    cfg.kubernetes.warmPools = o.warmPools.pools;
    cfg.kubernetes.warmPoolReconcileIntervalMs = o.warmPools.reconcileIntervalMs;
  }
  return cfg;
}
