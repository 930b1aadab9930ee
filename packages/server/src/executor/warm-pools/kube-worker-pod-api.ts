import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { describeKubeError } from '../kubernetes/kubernetes-executor.js';
import { LABEL, MANAGED_BY, labelValue } from '../kubernetes/labels.js';
import {
  POOL_LABEL,
  WARM_POOL_EXECUTOR,
  buildPoolPod,
  type PoolPodBuildInput,
} from '../kubernetes/pool-pod-builder.js';
import type { PoolPodState, WorkerPodApi } from './pool-manager.js';

/** What the pool pods share with the Kubernetes executor's attempt pods. */
export type PoolPodSettings = Omit<PoolPodBuildInput, 'name' | 'pool' | 'poolKey' | 'agentUrl'> & {
  /** read at each create: the agent port's URL is known only once it listens */
  agentUrl: string;
};

/** A stable error: the API's status and reason word only (a body can quote the pod sent). */
export class WorkerPodApiError extends Error {
  readonly code = 'LF_WARM_POOL_POD_FAILED';
}

/**
 * The warm pools' pods through the executor's CoreV1Api. Listing is by the pool label within
 * this installation, so a pool never sees (nor deletes) another installation's pods.
 */
export function kubeWorkerPodApi(core: CoreV1Api, settings: PoolPodSettings): WorkerPodApi {
  const selector = (poolKey: string) =>
    [
      `${LABEL.managedBy}=${MANAGED_BY}`,
      `${LABEL.instance}=${labelValue(settings.instance)}`,
      `${LABEL.executor}=${WARM_POOL_EXECUTOR}`,
      `${POOL_LABEL}=${poolKey}`,
    ].join(',');
  return {
    async create({ namespace, name, pool, poolKey }) {
      const body = buildPoolPod({
        ...settings,
        agentUrl: settings.agentUrl,
        name,
        pool,
        poolKey,
      });
      try {
        const made = await core.createNamespacedPod({ namespace, body });
        return { uid: made.metadata?.uid ?? '' };
      } catch (err) {
        throw new WorkerPodApiError(
          `LF_WARM_POOL_POD_FAILED: could not create warm-pool pod ${name} in namespace ${namespace} (${describeKubeError(err)}); check the control plane's RBAC and the pool's service account`,
        );
      }
    },
    async delete(namespace, name) {
      try {
        await core.deleteNamespacedPod({
          name,
          namespace,
          gracePeriodSeconds: settings.terminationGracePeriodSeconds,
        });
      } catch (err) {
        if ((err as { code?: unknown }).code === 404) return;
        throw new WorkerPodApiError(
          `LF_WARM_POOL_POD_FAILED: could not delete warm-pool pod ${name} in namespace ${namespace} (${describeKubeError(err)}); the next reconcile retries`,
        );
      }
    },
    async list(namespace, poolKey) {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: selector(poolKey) });
      return pods.items.map(podState);
    },
  };
}

function podState(pod: V1Pod): PoolPodState {
  const phase = pod.status?.phase ?? 'Pending';
  const terminated = pod.status?.containerStatuses?.find((c) => c.name === 'agent')?.state
    ?.terminated;
  return {
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    finished:
      phase === 'Succeeded' || phase === 'Failed' || terminated !== undefined
        ? { terminationMessage: terminated?.message ?? '' }
        : null,
    deleting: pod.metadata?.deletionTimestamp !== undefined,
  };
}
