import type { AgentChannelMode } from '../rpc/agent-server.js';
import type { KubernetesExecutorConfig } from '../config/server-config.js';
import type { ExchangeBootstrap } from '@leoflow/core';
import { checkExchangeBoot } from './exchange-boot.js';
import type { BootstrapSecretKube } from '../executor/kubernetes/exchange/kube-bootstrap-secret.js';
import type { ExchangeKubeClient } from '../executor/kubernetes/exchange/kube-token-review.js';
import type {
  ExchangeMetrics,
  TokenExchangeDeps,
} from '../executor/kubernetes/exchange/token-exchange.js';

/**
 * What the control plane wires for auth.agent_token_transport=exchange, after the boot check
 * (exchange-boot.ts) passed: the apiserver client from the Kubernetes executor's own kubeconfig
 * (or in-cluster account), and each tenant's placement from executor.kubernetes.tenants. Under
 * auth.exchange_bootstrap=secret_key_ref also the Secret client the per-attempt Secrets are read
 * and deleted with.
 */
export async function wireExchange(input: {
  kubernetes: KubernetesExecutorConfig | null;
  channelMode: AgentChannelMode;
  metrics?: ExchangeMetrics;
  /** auth.exchange_bootstrap; projected_token when absent */
  bootstrap?: ExchangeBootstrap;
  /** execution.warm_pools_enabled: warm pods exchange projected tokens whatever the bootstrap */
  warmPools?: boolean;
  /** tests: clients of their own */
  kube?: ExchangeKubeClient;
  secretKube?: BootstrapSecretKube;
}): Promise<Omit<TokenExchangeDeps, 'store' | 'tokens' | 'clock' | 'logger'>> {
  const k8s = input.kubernetes;
  let kube: ExchangeKubeClient | null = input.kube ?? null;
  let secretKube: BootstrapSecretKube | null = input.secretKube ?? null;
  const secretKeyRef = input.bootstrap === 'secret_key_ref';
  if ((!kube || (secretKeyRef && !secretKube)) && k8s) {
    const { KubeConfig } = await import('@kubernetes/client-node');
    const kc = new KubeConfig();
    if (k8s.kubeconfig) kc.loadFromFile(k8s.kubeconfig);
    else kc.loadFromCluster();
    if (!kube) {
      const { kubeExchangeClient } =
        await import('../executor/kubernetes/exchange/kube-token-review.js');
      kube = kubeExchangeClient(kc);
    }
    if (secretKeyRef && !secretKube) {
      const { kubeBootstrapSecretClient } =
        await import('../executor/kubernetes/exchange/kube-bootstrap-secret.js');
      secretKube = kubeBootstrapSecretClient(kc);
    }
  }
  const namespaces = [...new Set(Object.values(k8s?.tenants ?? {}).map((t) => t.namespace))];
  await checkExchangeBoot({
    kube,
    channelMode: input.channelMode,
    ...(secretKeyRef && secretKube ? { secretBootstrap: { kube: secretKube, namespaces } } : {}),
    alsoTokenReviews: input.warmPools === true,
  });
  return {
    kube: kube!,
    ...(secretKeyRef && secretKube ? { bootstrapSecrets: { kube: secretKube, namespaces } } : {}),
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
