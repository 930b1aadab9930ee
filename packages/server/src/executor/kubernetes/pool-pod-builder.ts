import type {
  V1Container,
  V1EnvVar,
  V1Pod,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { WarmPoolConfig } from '../../config/warm-pool-config.js';
import { WORKER_POOL_ANNOTATION } from '../../exchange/reviewed-pod.js';
import { LABEL, MANAGED_BY, TASK_COMPONENT, labelValue } from './labels.js';
import { TMP_DIR, WORK_DIR } from './pod-builder.js';
import { EXCHANGE_TOKEN_FILE_ENV, projectedExchangeToken } from './projected-token.js';

/** Tells the agent image to run its warm worker loop instead of one attempt. */
export const WARM_WORKER_ENV = 'LEOFLOW_WARM_WORKER';
/** The executor label value of pool pods: the Kubernetes executor's watch never matches them. */
export const WARM_POOL_EXECUTOR = 'warm-pool';
/** The label a pool lists its own pods by (the pool key is a valid label value). */
export const POOL_LABEL = 'leoflow.io/worker-pool';

const CA_DIR = '/etc/leoflow/tls';

/**
 * What the worker needs, as root, to run each attempt under its own uid — all within Pod
 * Security `baseline`: setuid/setgid to the attempt's uid, chown its work dir to it, kill its
 * leftovers, and remove its files afterwards.
 */
export const ATTEMPT_UID_CAPABILITIES = Object.freeze([
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'KILL',
  'SETGID',
  'SETUID',
]);

export interface PoolPodBuildInput {
  name: string;
  pool: WarmPoolConfig;
  poolKey: string;
  /** the control plane's agent URL as pods reach it */
  agentUrl: string;
  heartbeatIntervalMs: number;
  instance: string;
  runAsUser: number;
  terminationGracePeriodSeconds: number;
  agentCa: { configMap: string; key: string } | null;
  /** the projected token's lifetime; floored at the apiserver's ten minutes */
  projectedTokenSeconds?: number;
}

/**
 * One warm-pool pod. Pure, like buildAttemptPod, and as locked down but for the attempt-uid
 * capabilities (pool.attemptUids, default on; off, it is `restricted`): the pod names its pool
 * (annotation and label) and nothing else — no attempt identity, no Leoflow credential. The
 * worker proves which pod it is with the projected token (bound to this pod by the kubelet),
 * exchanged once for a worker token; every attempt's token reaches it in-band later.
 */
export function buildPoolPod(input: PoolPodBuildInput): V1Pod {
  const attemptUids = input.pool.attemptUids !== false;
  const projected = projectedExchangeToken(input.projectedTokenSeconds ?? 600);
  const env: V1EnvVar[] = [
    { name: WARM_WORKER_ENV, value: '1' },
    { name: 'LEOFLOW_AGENT_URL', value: input.agentUrl },
    { name: 'LEOFLOW_HEARTBEAT_INTERVAL_MS', value: String(input.heartbeatIntervalMs) },
    { name: EXCHANGE_TOKEN_FILE_ENV, value: projected.file },
    { name: 'LEOFLOW_WORKDIR', value: WORK_DIR },
    { name: 'HOME', value: WORK_DIR },
    { name: 'TMPDIR', value: TMP_DIR },
  ];
  const mounts: V1VolumeMount[] = [
    { name: 'work', mountPath: WORK_DIR },
    { name: 'tmp', mountPath: TMP_DIR },
    projected.mount,
  ];
  const volumes: V1Volume[] = [
    { name: 'work', emptyDir: {} },
    { name: 'tmp', emptyDir: {} },
    projected.volume,
  ];
  if (input.agentCa) {
    env.push({ name: 'NODE_EXTRA_CA_CERTS', value: `${CA_DIR}/${input.agentCa.key}` });
    mounts.push({ name: 'agent-ca', mountPath: CA_DIR, readOnly: true });
    volumes.push({
      name: 'agent-ca',
      configMap: {
        name: input.agentCa.configMap,
        items: [{ key: input.agentCa.key, path: input.agentCa.key }],
      },
    });
  }
  const container: V1Container = {
    name: 'agent',
    image: input.pool.image,
    imagePullPolicy: 'IfNotPresent',
    env,
    volumeMounts: mounts,
    // The worker writes why it exited here ("survivor" when an attempt left something behind).
    terminationMessagePolicy: 'FallbackToLogsOnError',
    securityContext: attemptUids
      ? {
          // root, but only to give each attempt its own uid: switch to it, hand it its work
          // dir, kill what it leaves, remove its files; no escalation, nothing else.
          runAsNonRoot: false,
          runAsUser: 0,
          runAsGroup: 0,
          allowPrivilegeEscalation: false,
          privileged: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'], add: [...ATTEMPT_UID_CAPABILITIES] },
          seccompProfile: { type: 'RuntimeDefault' },
        }
      : {
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
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: input.name,
      namespace: input.pool.namespace,
      labels: {
        [LABEL.managedBy]: MANAGED_BY,
        // Task code runs here: the task NetworkPolicy must select it like any attempt pod.
        [LABEL.component]: TASK_COMPONENT,
        [LABEL.instance]: labelValue(input.instance),
        [LABEL.executor]: WARM_POOL_EXECUTOR,
        [LABEL.tenant]: labelValue(input.pool.tenant),
        [POOL_LABEL]: input.poolKey,
      },
      annotations: { [WORKER_POOL_ANNOTATION]: input.poolKey },
    },
    spec: {
      restartPolicy: 'Never',
      serviceAccountName: input.pool.serviceAccount,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      terminationGracePeriodSeconds: input.terminationGracePeriodSeconds,
      securityContext: attemptUids
        ? { seccompProfile: { type: 'RuntimeDefault' } }
        : {
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
}
