import type { AgentChannelMode } from '../rpc/agent-server.js';
import type { KubernetesExecutorConfig } from '../config/server-config.js';
import { checkExchangeBoot } from './exchange-boot.js';
import type { ExchangeKubeClient } from './kube-token-review.js';
import type { ExchangeMetrics, TokenExchangeDeps } from './token-exchange.js';

/**
 * What the control plane wires for auth.agent_token_transport=exchange, after the boot check
 * (exchange-boot.ts) passed: the apiserver client from the Kubernetes executor's own kubeconfig
 * (or in-cluster account), and each tenant's placement from executor.kubernetes.tenants.
 */
export async function wireExchange(input: {
  kubernetes: KubernetesExecutorConfig | null;
  channelMode: AgentChannelMode;
  metrics?: ExchangeMetrics;
  /** tests: a client of their own */
  kube?: ExchangeKubeClient;
}): Promise<Omit<TokenExchangeDeps, 'store' | 'tokens' | 'clock' | 'logger'>> {
  const k8s = input.kubernetes;
  let kube: ExchangeKubeClient | null = input.kube ?? null;
  if (!kube && k8s) {
    const { KubeConfig } = await import('@kubernetes/client-node');
    const { kubeExchangeClient } = await import('./kube-token-review.js');
    const kc = new KubeConfig();
    if (k8s.kubeconfig) kc.loadFromFile(k8s.kubeconfig);
    else kc.loadFromCluster();
    kube = kubeExchangeClient(kc);
  }
  await checkExchangeBoot({ kube, channelMode: input.channelMode });
  return {
    kube: kube!,
    tenantPlacement: (tenantId) => {
      const t = k8s?.tenants[tenantId];
      if (!t) return undefined;
      return {
        namespace: t.namespace,
        serviceAccounts: t.serviceAccounts.length > 0 ? t.serviceAccounts : ['default'],
      };
    },
    ...(input.metrics ? { metrics: input.metrics } : {}),
  };
}
