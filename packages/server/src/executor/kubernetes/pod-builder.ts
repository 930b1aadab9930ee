import type {
  V1Container,
  V1EnvVar,
  V1Pod,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import {
  resolveKubernetesChoices,
  type KubernetesAllowlist,
  type TaskKubernetes,
} from '@leoflow/core';
import type { AttemptIdentity } from '../../auth/agent-token.js';
import {
  IDENTITY_ANNOTATION,
  LABEL,
  MANAGED_BY,
  TASK_COMPONENT,
  labelValue,
  podName,
} from './labels.js';
import type { PodTokenTransport } from './token-transport.js';

/** Where the pod's writable volumes are mounted (the root filesystem is read-only). */
export const WORK_DIR = '/work';
export const TMP_DIR = '/tmp';
const CA_DIR = '/etc/leoflow/tls';

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
  agentCa: { configMap: string; key: string } | null;
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

  const env: V1EnvVar[] = [];
  for (const [k, v] of Object.entries(input.extraEnv ?? {})) {
    if (!isReserved(k)) env.push({ name: k, value: v });
  }
  const platform: Record<string, string> = {
    LEOFLOW_AGENT_URL: input.agentUrl,
    LEOFLOW_HEARTBEAT_INTERVAL_MS: String(input.heartbeatIntervalMs),
    LEOFLOW_TASK_INSTANCE_ID: identity.task_instance_id,
    LEOFLOW_WORKDIR: WORK_DIR,
    HOME: WORK_DIR,
    TMPDIR: TMP_DIR,
  };
  if (input.agentCa) platform.NODE_EXTRA_CA_CERTS = `${CA_DIR}/${input.agentCa.key}`;
  // Platform keys win over any operator extra of the same name.
  for (const [k, v] of Object.entries(platform)) {
    const i = env.findIndex((e) => e.name === k);
    if (i >= 0) env.splice(i, 1);
    env.push({ name: k, value: v });
  }

  const mounts: V1VolumeMount[] = [
    { name: 'work', mountPath: WORK_DIR },
    { name: 'tmp', mountPath: TMP_DIR },
  ];
  const volumes: V1Volume[] = [
    { name: 'work', emptyDir: {} },
    { name: 'tmp', emptyDir: {} },
  ];
  if (input.agentCa) {
    mounts.push({ name: 'agent-ca', mountPath: CA_DIR, readOnly: true });
    volumes.push({
      name: 'agent-ca',
      configMap: {
        name: input.agentCa.configMap,
        items: [{ key: input.agentCa.key, path: input.agentCa.key }],
      },
    });
  }

  const resources: V1Container['resources'] = {};
  if (Object.keys(choice.resources.requests).length > 0)
    resources.requests = { ...choice.resources.requests };
  if (Object.keys(choice.resources.limits).length > 0)
    resources.limits = { ...choice.resources.limits };

  const container: V1Container = {
    name: 'agent',
    image: choice.image,
    imagePullPolicy: 'IfNotPresent',
    env,
    resources,
    volumeMounts: mounts,
    // The agent writes its bootstrap failure reason here; kubectl describe shows it.
    terminationMessagePolicy: 'FallbackToLogsOnError',
    securityContext: {
      runAsNonRoot: true,
      runAsUser: input.runAsUser,
      runAsGroup: input.runAsUser,
      allowPrivilegeEscalation: false,
      privileged: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };

  const timeout = input.task.execution_timeout_seconds;
  const pod: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: input.placement.namespace,
      labels: {
        [LABEL.managedBy]: MANAGED_BY,
        [LABEL.component]: TASK_COMPONENT,
        [LABEL.instance]: labelValue(input.instance),
        [LABEL.executor]: labelValue(input.executorName),
        [LABEL.tenant]: labelValue(identity.tenant_id),
        [LABEL.dag]: labelValue(identity.dag_id),
        [LABEL.run]: labelValue(identity.run_id),
        [LABEL.task]: labelValue(identity.task_id),
        [LABEL.try]: String(identity.try_number),
        [LABEL.taskInstance]: labelValue(identity.task_instance_id),
        [LABEL.dispatchGen]: String(gen),
      },
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
    },
    spec: {
      restartPolicy: 'Never',
      serviceAccountName: choice.serviceAccount,
      // The task must not hold a Kubernetes credential it did not ask for.
      automountServiceAccountToken: false,
      // Service env vars would tell task code every Service in the namespace.
      enableServiceLinks: false,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      terminationGracePeriodSeconds: input.terminationGracePeriodSeconds,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: input.runAsUser,
        runAsGroup: input.runAsUser,
        fsGroup: input.runAsUser,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [container],
      volumes,
    },
  };
  if (timeout !== null) {
    // A backstop behind the agent's own timeout and the control plane's: counted from when the
    // kubelet takes the pod, so it includes the image pull the pod-start timeout allows for.
    pod.spec!.activeDeadlineSeconds =
      timeout + Math.ceil(input.podStartTimeoutMs / 1000) + input.terminationGracePeriodSeconds;
  }
  input.transport.apply(pod, container, input.token);
  return pod;
}
