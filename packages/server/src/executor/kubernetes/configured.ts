import { isActive } from '@leoflow/core';
import type { Logger } from 'pino';
import type { KubernetesExecutorConfig } from '../../config/server-config.js';
import type { ExecutorPolicy } from '../executor-policy.js';
import type { TaskInstanceStore } from '../../store/ports/task-instances.js';
import type { Executor } from '../executor.js';
import { allowlistOf } from './allowlist.js';

/**
 * The Kubernetes executor a configuration's executor.kubernetes section turns on. Loaded on
 * demand: a control plane without the section never loads the Kubernetes client.
 */
export async function createKubernetesExecutor(
  cfg: KubernetesExecutorConfig,
  store: Pick<TaskInstanceStore, 'getTaskInstanceById'>,
  logger: Logger,
  transport: 'envvar' | 'exchange' = 'envvar',
  exchangeBootstrap: 'projected_token' | 'secret_key_ref' = 'projected_token',
): Promise<Executor> {
  const { KubernetesExecutor } = await import('./kubernetes-executor.js');
  const { podTokenTransport } = await import('./token-transport.js');
  return new KubernetesExecutor({
    config: cfg,
    logger,
    transport: podTokenTransport(transport, exchangeBootstrap),
    // The same predicate the heartbeat path uses: this try, this dispatch, still active.
    attemptLive: async (id) => {
      const row = await store.getTaskInstanceById(id.task_instance_id);
      return (
        row !== undefined &&
        row !== null &&
        row.try_number === id.try_number &&
        row.dispatch_gen === (id.dispatch_gen ?? 0) &&
        isActive(row.state)
      );
    },
  });
}

/** What DAG registration checks tasks against, for the configured executors. */
export function executorPolicy(
  executorNames: readonly string[],
  kubernetes: KubernetesExecutorConfig | null,
): ExecutorPolicy {
  return {
    executors: executorNames,
    kubernetesExecutor: kubernetes ? 'kubernetes' : null,
    kubernetesAllowlist: (tenantId) => {
      const t = kubernetes?.tenants[tenantId];
      return t && kubernetes ? allowlistOf(t, kubernetes.agentImage) : undefined;
    },
  };
}
