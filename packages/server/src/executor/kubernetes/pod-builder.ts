import type { V1EnvVar, V1Pod, V1ResourceRequirements } from '@kubernetes/client-node';
import {
  resolveKubernetesChoices,
  type KubernetesAllowlist,
  type TaskKubernetes,
} from '@leoflow/core';
import type { AttemptIdentity } from '../../auth/agent-token.js';
import {
  agentContainer,
  agentPlatformEnv,
  agentVolumes,
  type AgentCa,
  type AgentRunAs,
} from './agent-container.js';
import { agentPod, agentPodLabels } from './agent-pod.js';
import { IDENTITY_ANNOTATION, LABEL, labelValue, podName } from './labels.js';
import type { PodTokenTransport } from './token-transport.js';

/** One tenant's place in the cluster: its namespace and what its tasks may choose. */
export interface KubernetesTenantPlacement {
  namespace: string;
  allowlist: KubernetesAllowlist;
}

export interface PodBuildInput {
  identity: AttemptIdentity;
  /** the attempt's credential; the transport decides where it goes */
  token: string;
  transport: PodTokenTransport;
  /** the control plane's agent URL as pods reach it (the agent Service), not the local one */
  agentUrl: string;
  heartbeatIntervalMs: number;
  task: { execution_timeout_seconds: number | null; kubernetes?: TaskKubernetes };
  placement: KubernetesTenantPlacement;
  /** names this control plane on its pods (leoflow.io/instance) */
  instance: string;
  executorName: string;
  /** the uid/gid the agent runs as (non-root; the agent image's user) */
  runAsUser: number;
  /** how long a pod may take to start (image pull, scheduling): added to its deadline */
  podStartTimeoutMs: number;
  terminationGracePeriodSeconds: number;
  /** a ConfigMap holding the agent channel's CA certificate (public), or null for none */
  agentCa: AgentCa | null;
  /**
   * Operator-set extra env for every task pod (a proxy, a time zone). LEOFLOW_* names (any
   * case) are dropped: that namespace is the platform's, and a spoofed LEOFLOW_AGENT_URL or token
   * variable must never reach the agent.
   */
  extraEnv?: Record<string, string>;
}

function isReserved(name: string): boolean {
  return name.toUpperCase().startsWith('LEOFLOW_');
}

/**
 * Builds the one pod of one attempt. Pure: the same input gives the same pod, so tests can
 * serialise every pod the executor would create and check exactly what it holds.
 *
 * Where the pod runs is the operator's: the namespace is the tenant's, the service account,
 * image and resources come from the tenant's allowlist (a task choosing within it), and the
 * security context is fixed so the pod passes Pod Security Admission `restricted`. The task's
 * own env is not on the pod: the agent receives it with the task spec and applies it after its
 * own strip, so a DAG author's values never sit on the Pod object.
 */
export function buildAttemptPod(input: PodBuildInput): V1Pod {
  const { identity } = input;
  const choice = resolveKubernetesChoices(input.task.kubernetes, input.placement.allowlist);
  const gen = identity.dispatch_gen ?? 0;
  const name = podName(
    identity.task_instance_id,
    identity.try_number,
    gen,
    identity.dag_id,
    identity.task_id,
  );
  const runAs: AgentRunAs = { kind: 'user', uid: input.runAsUser };

  const env: V1EnvVar[] = [];
  for (const [k, v] of Object.entries(input.extraEnv ?? {})) {
    if (!isReserved(k)) env.push({ name: k, value: v });
  }
  const platform = agentPlatformEnv(input, {
    LEOFLOW_TASK_INSTANCE_ID: identity.task_instance_id,
  });
  // Platform keys win over any operator extra of the same name.
  for (const [k, v] of Object.entries(platform)) {
    const i = env.findIndex((e) => e.name === k);
    if (i >= 0) env.splice(i, 1);
    env.push({ name: k, value: v });
  }

  const { volumeMounts, volumes } = agentVolumes(input.agentCa);

  const resources: V1ResourceRequirements = {};
  if (Object.keys(choice.resources.requests).length > 0)
    resources.requests = { ...choice.resources.requests };
  if (Object.keys(choice.resources.limits).length > 0)
    resources.limits = { ...choice.resources.limits };

  const container = agentContainer({ image: choice.image, env, resources, volumeMounts, runAs });

  const timeout = input.task.execution_timeout_seconds;
  const pod = agentPod({
    name,
    namespace: input.placement.namespace,
    labels: agentPodLabels(
      { instance: input.instance, executor: input.executorName, tenant: identity.tenant_id },
      {
        [LABEL.dag]: labelValue(identity.dag_id),
        [LABEL.run]: labelValue(identity.run_id),
        [LABEL.task]: labelValue(identity.task_id),
        [LABEL.try]: String(identity.try_number),
        [LABEL.taskInstance]: labelValue(identity.task_instance_id),
        [LABEL.dispatchGen]: String(gen),
      },
    ),
    annotations: {
      [IDENTITY_ANNOTATION]: JSON.stringify({
        ti: identity.task_instance_id,
        tenant: identity.tenant_id,
        dag: identity.dag_id,
        run: identity.run_id,
        task: identity.task_id,
        try: identity.try_number,
        gen,
      }),
    },
    serviceAccountName: choice.serviceAccount,
    terminationGracePeriodSeconds: input.terminationGracePeriodSeconds,
    runAs,
    container,
    volumes,
  });
  if (timeout !== null) {
    // A backstop behind the agent's own timeout and the control plane's: counted from when the
    // kubelet takes the pod, so it includes the image pull the pod-start timeout allows for.
    pod.spec!.activeDeadlineSeconds =
      timeout + Math.ceil(input.podStartTimeoutMs / 1000) + input.terminationGracePeriodSeconds;
  }
  input.transport.apply(pod, container, input.token);
  return pod;
}
