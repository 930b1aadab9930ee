import type { KubernetesAllowlist } from '@leoflow/core';
import type { KubernetesTenantConfig } from '../../config/kubernetes-tenant-config.js';

/** A tenant's configured allowlist; the agent image is its default image when none is listed. */
export function allowlistOf(t: KubernetesTenantConfig, agentImage: string): KubernetesAllowlist {
  return {
    images: t.images.length > 0 ? t.images : [agentImage],
    serviceAccounts: t.serviceAccounts,
    maxResources: t.maxResources,
    defaultResources: t.defaultResources,
  };
}
