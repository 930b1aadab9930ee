import type { KubernetesAllowlist } from '@leoflow/core';

/** What a DAG's executor choices are checked against: the executors and allowlists configured. */
export interface ExecutorPolicy {
  /** the configured executors' names */
  executors: readonly string[];
  /** the Kubernetes executor's name, when it is configured */
  kubernetesExecutor: string | null;
  /** the tenant's Kubernetes allowlist; undefined when the tenant has no Kubernetes placement */
  kubernetesAllowlist(tenantId: string): KubernetesAllowlist | undefined;
}
