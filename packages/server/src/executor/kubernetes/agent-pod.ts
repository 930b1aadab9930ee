import type { V1Container, V1Pod, V1PodSecurityContext, V1Volume } from '@kubernetes/client-node';
import type { AgentRunAs } from './agent-container.js';
import { LABEL, MANAGED_BY, TASK_COMPONENT, labelValue } from './labels.js';

/**
 * The labels every agent pod starts with: Leoflow manages it, task code runs in it (the task
 * NetworkPolicy selects on the component), which installation and executor made it, and for
 * which tenant; then `own`, the builder's own labels. Values go through labelValue.
 */
export function agentPodLabels(
  base: { instance: string; executor: string; tenant: string },
  own: Record<string, string>,
): Record<string, string> {
  return {
    [LABEL.managedBy]: MANAGED_BY,
    [LABEL.component]: TASK_COMPONENT,
    [LABEL.instance]: labelValue(base.instance),
    [LABEL.executor]: labelValue(base.executor),
    [LABEL.tenant]: labelValue(base.tenant),
    ...own,
  };
}

/**
 * The pod-level security context for an agent that runs as `runAs`: a non-root agent's pod
 * runs as its uid (fsGroup too, so the emptyDirs are its own); a root worker's pod sets only
 * seccomp and leaves the uid to the container.
 */
export function agentPodSecurityContext(runAs: AgentRunAs): V1PodSecurityContext {
  if (runAs.kind === 'root') return { seccompProfile: { type: 'RuntimeDefault' } };
  return {
    runAsNonRoot: true,
    runAsUser: runAs.uid,
    runAsGroup: runAs.uid,
    fsGroup: runAs.uid,
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

export interface AgentPodInput {
  name: string;
  namespace: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  serviceAccountName: string;
  terminationGracePeriodSeconds: number;
  runAs: AgentRunAs;
  /** the agent container; the pod holds this very object, so a transport may still amend it */
  container: V1Container;
  volumes: V1Volume[];
}

/**
 * The pod around one agent container: never restarted, no Kubernetes credential mounted (the
 * service account is the operator's choice, its token is not the task's), no Service env vars
 * (they would tell task code every Service in the namespace), nothing of the host's.
 */
export function agentPod(input: AgentPodInput): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: input.name,
      namespace: input.namespace,
      labels: input.labels,
      annotations: input.annotations,
    },
    spec: {
      restartPolicy: 'Never',
      serviceAccountName: input.serviceAccountName,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      terminationGracePeriodSeconds: input.terminationGracePeriodSeconds,
      securityContext: agentPodSecurityContext(input.runAs),
      containers: [input.container],
      volumes: input.volumes,
    },
  };
}
