import type { KubernetesExecutorConfig } from '../config/server-config.js';
import type { KubernetesAccessProbe } from './types.js';

/**
 * The real probe: SelfSubjectAccessReviews, made with the identity the executor itself uses
 * (executor.kubernetes.kubeconfig, else the pod's service account). The Kubernetes client is
 * loaded only when the section is configured.
 */
export async function openKubernetesAccessProbe(
  cfg: KubernetesExecutorConfig,
): Promise<KubernetesAccessProbe> {
  const { AuthorizationV1Api, KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  if (cfg.kubeconfig) kc.loadFromFile(cfg.kubeconfig);
  else kc.loadFromCluster();
  const api = kc.makeApiClient(AuthorizationV1Api);
  return {
    async allowed(namespace, right) {
      const review = await api.createSelfSubjectAccessReview({
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: {
            resourceAttributes: {
              namespace,
              verb: right.verb,
              resource: right.resource,
              ...(right.subresource ? { subresource: right.subresource } : {}),
            },
          },
        },
      });
      return review.status?.allowed === true;
    },
  };
}
