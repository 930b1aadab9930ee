import type { V1EnvVar, V1Pod } from '@kubernetes/client-node';
import type { WarmPoolConfig } from '../../config/warm-pool-config.js';
import { WORKER_POOL_ANNOTATION } from './exchange/reviewed-pod.js';
import {
  agentContainer,
  agentPlatformEnv,
  agentVolumes,
  type AgentCa,
  type AgentRunAs,
} from './agent-container.js';
import { agentPod, agentPodLabels } from './agent-pod.js';
import { EXCHANGE_TOKEN_FILE_ENV, projectedExchangeToken } from './projected-token.js';

/** Tells the agent image to run its warm worker loop instead of one attempt. */
export const WARM_WORKER_ENV = 'LEOFLOW_WARM_WORKER';
/** The executor label value of pool pods: the Kubernetes executor's watch never matches them. */
export const WARM_POOL_EXECUTOR = 'warm-pool';
/** The label a pool lists its own pods by (the pool key is a valid label value). */
export const POOL_LABEL = 'leoflow.io/worker-pool';

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
  agentCa: AgentCa | null;
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
  // With attempt uids: root, but only to give each attempt its own uid — switch to it, hand it
  // its work dir, kill what it leaves, remove its files; no escalation, nothing else.
  const runAs: AgentRunAs =
    input.pool.attemptUids !== false
      ? { kind: 'root', addCapabilities: ATTEMPT_UID_CAPABILITIES }
      : { kind: 'user', uid: input.runAsUser };
  const projected = projectedExchangeToken(input.projectedTokenSeconds ?? 600);
  const platform = agentPlatformEnv(input, { [EXCHANGE_TOKEN_FILE_ENV]: projected.file });
  const env: V1EnvVar[] = [
    { name: WARM_WORKER_ENV, value: '1' },
    ...Object.entries(platform).map(([name, value]) => ({ name, value })),
  ];
  const { volumeMounts, volumes } = agentVolumes(input.agentCa, [projected]);
  return agentPod({
    name: input.name,
    namespace: input.pool.namespace,
    labels: agentPodLabels(
      { instance: input.instance, executor: WARM_POOL_EXECUTOR, tenant: input.pool.tenant },
      { [POOL_LABEL]: input.poolKey },
    ),
    annotations: { [WORKER_POOL_ANNOTATION]: input.poolKey },
    serviceAccountName: input.pool.serviceAccount,
    terminationGracePeriodSeconds: input.terminationGracePeriodSeconds,
    runAs,
    container: agentContainer({ image: input.pool.image, env, volumeMounts, runAs }),
    volumes,
  });
}
