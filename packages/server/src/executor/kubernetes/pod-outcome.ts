import type { V1Pod } from '@kubernetes/client-node';

/** Why a pod ended without its agent reporting, as a stable code and a message naming the fix. */
export interface PodFailureCause {
  code: PodFailureCode;
  message: string;
}

export type PodFailureCode =
  | 'LF_POD_OOM_KILLED'
  | 'LF_POD_IMAGE_PULL'
  | 'LF_POD_UNSCHEDULABLE'
  | 'LF_POD_DEADLINE_EXCEEDED'
  | 'LF_POD_START_TIMEOUT'
  | 'LF_POD_CONFIG'
  | 'LF_POD_EVICTED';

/** What a pod's status says of its attempt. */
export type PodOutcome =
  /** not started yet (scheduling, image pull): kept up to the pod-start timeout */
  | { kind: 'starting'; until: number; unschedulable: string | null }
  | { kind: 'running' }
  /** the container ended: its exit code, and a cause when Kubernetes gives one */
  | { kind: 'ended'; exitCode: number | null; cause: PodFailureCause | null }
  /** it can never start (bad image, bad config, start timeout): the executor deletes it */
  | { kind: 'cannot-start'; cause: PodFailureCause };

const IMAGE_PULL_REASONS = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'RegistryUnavailable',
]);
const CONFIG_REASONS = new Set(['CreateContainerConfigError', 'CreateContainerError']);

/**
 * Classifies a pod from its status. Messages use only what Kubernetes fills in from the pod's own
 * spec (image, limit) and the scheduler's summary, never a container's output or an API
 * response body, so nothing an attempt holds can travel into an error.
 */
export function podOutcome(pod: V1Pod, now: number, podStartTimeoutMs: number): PodOutcome {
  const status = pod.status ?? {};
  const container = status.containerStatuses?.find((c) => c.name === 'agent');
  const spec = pod.spec?.containers.find((c) => c.name === 'agent');
  const terminated = container?.state?.terminated;
  const phase = status.phase ?? 'Pending';

  if (phase === 'Succeeded' || phase === 'Failed' || terminated) {
    if (status.reason === 'DeadlineExceeded') {
      return {
        kind: 'ended',
        exitCode: terminated?.exitCode ?? null,
        cause: {
          code: 'LF_POD_DEADLINE_EXCEEDED',
          message: `the pod ran past its activeDeadlineSeconds (${pod.spec?.activeDeadlineSeconds ?? '?'}s: the execution timeout plus the pod-start allowance) and Kubernetes stopped it; raise the task's execution_timeout_seconds if it needs longer`,
        },
      };
    }
    if (status.reason === 'Evicted') {
      return {
        kind: 'ended',
        exitCode: terminated?.exitCode ?? null,
        cause: {
          code: 'LF_POD_EVICTED',
          message: `the node evicted the pod (${clip(status.message)}); retries apply, and a task that needs more ${/memory/i.test(status.message ?? '') ? 'memory' : 'resources'} should request it`,
        },
      };
    }
    if (terminated?.reason === 'OOMKilled') {
      const limit = spec?.resources?.limits?.memory;
      return {
        kind: 'ended',
        exitCode: terminated.exitCode ?? null,
        cause: {
          code: 'LF_POD_OOM_KILLED',
          message: `the task ran out of memory and was OOM-killed${limit ? ` at its limit of ${limit}` : ''}; raise kubernetes.resources.limits.memory (within the tenant's ceiling) or use less memory`,
        },
      };
    }
    // Succeeded without a container status (should not happen) counts as a clean exit.
    return {
      kind: 'ended',
      exitCode: terminated?.exitCode ?? (phase === 'Succeeded' ? 0 : null),
      cause: null,
    };
  }

  const waiting = container?.state?.waiting;
  if (waiting?.reason && IMAGE_PULL_REASONS.has(waiting.reason)) {
    return {
      kind: 'cannot-start',
      cause: {
        code: 'LF_POD_IMAGE_PULL',
        message: `the pod's image ${spec?.image ?? '?'} could not be pulled (${waiting.reason}); check the image name and tag in the tenant's allowlist and that the nodes can pull it (imagePullSecrets on the service account)`,
      },
    };
  }
  if (waiting?.reason && CONFIG_REASONS.has(waiting.reason)) {
    return {
      kind: 'cannot-start',
      cause: {
        code: 'LF_POD_CONFIG',
        message: `Kubernetes could not create the pod's container (${waiting.reason}); check the agent image's user (the pod runs as non-root) and the agent CA ConfigMap the executor mounts`,
      },
    };
  }
  if (phase === 'Running') return { kind: 'running' };

  const created = Date.parse(pod.metadata?.creationTimestamp as unknown as string);
  const until = (Number.isFinite(created) ? created : now) + podStartTimeoutMs;
  const scheduled = status.conditions?.find((c) => c.type === 'PodScheduled');
  const unschedulable =
    scheduled?.status === 'False' && scheduled.reason === 'Unschedulable'
      ? clip(scheduled.message)
      : null;
  if (now >= until) {
    return {
      kind: 'cannot-start',
      cause: unschedulable
        ? {
            code: 'LF_POD_UNSCHEDULABLE',
            message: `no node could take the pod within the pod-start timeout (${Math.round(podStartTimeoutMs / 1000)}s): ${unschedulable}; lower the task's resource requests or add capacity`,
          }
        : {
            code: 'LF_POD_START_TIMEOUT',
            message: `the pod did not start within the pod-start timeout (${Math.round(podStartTimeoutMs / 1000)}s); a slow image pull needs a longer executor.kubernetes.pod_start_timeout`,
          },
    };
  }
  return { kind: 'starting', until, unschedulable };
}

/** A Kubernetes-written summary, bounded so it cannot swamp an error message. */
function clip(text: string | undefined): string {
  const t = (text ?? '').replace(/\s+/g, ' ').trim();
  return t.length > 200 ? `${t.slice(0, 200)}…` : t || 'no message';
}
