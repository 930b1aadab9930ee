import type { ResourceList, TaskResources } from '@leoflow/core';

/** One tenant's place in executor.kubernetes.tenants: its namespace and what its tasks may choose. */
export interface KubernetesTenantConfig {
  /** the namespace this tenant's pods run in (the operator's choice, never the DAG's) */
  namespace: string;
  /** images its tasks may choose; the first is the default (the agent image when empty) */
  images: string[];
  /** service accounts its tasks may choose; the first is the default */
  serviceAccounts: string[];
  /** ceilings on one task's requests and limits; a resource without a ceiling cannot be set */
  maxResources: ResourceList;
  defaultResources: TaskResources;
}
