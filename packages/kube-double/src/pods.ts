// Pod defaults, the ServiceAccount admission plugin, and graceful deletion: a pod bound to a node
// is only marked (deletionTimestamp = now + grace) and its kubelet removes it once the containers
// have stopped; an unbound or finished pod goes at once.
import { rfc3339 } from './clock.js';
import type { ApiContext, DeleteOptions, ResourceBehaviour } from './behaviours.js';
import type { KubeObject, Pod } from './objects.js';
import { enforcedLevel, podSecurityViolations } from './pod-security.js';
import { forbidden, invalid, type FieldError } from './status.js';

const DEFAULT_GRACE_SECONDS = 30;

function podFieldErrors(pod: Pod): FieldError[] {
  const errors: FieldError[] = [];
  const containers = pod.spec?.containers;
  if (!Array.isArray(containers) || containers.length === 0) {
    errors.push({
      field: 'spec.containers',
      reason: 'FieldValueRequired',
      message: 'Required value',
    });
    return errors;
  }
  containers.forEach((container, index) => {
    if (!container.name) {
      errors.push({
        field: `spec.containers[${index}].name`,
        reason: 'FieldValueRequired',
        message: 'Required value',
      });
    }
    if (!container.image) {
      errors.push({
        field: `spec.containers[${index}].image`,
        reason: 'FieldValueRequired',
        message: 'Required value',
      });
    }
  });
  errors.push(...volumeErrors(pod));
  const deadline = pod.spec.activeDeadlineSeconds;
  if (deadline !== undefined && (!Number.isInteger(deadline) || deadline <= 0)) {
    errors.push({
      field: 'spec.activeDeadlineSeconds',
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${deadline}: must be between 1 and 2147483647, inclusive`,
    });
  }
  return errors;
}

/** The longest expirationSeconds a projected service-account token may ask for (2^32 s). */
const MAX_PROJECTED_EXPIRATION = 2 ** 32;

/**
 * Volume rules the apiserver checks (the subset the double knows): a projected service-account
 * token needs a path and 600 s ≤ expirationSeconds ≤ 2^32 s; a volumeMount must name a (valid)
 * volume. Field paths and wording are the apiserver's, including its `projected.path` for a
 * token source without a path.
 */
function volumeErrors(pod: Pod): FieldError[] {
  const errors: FieldError[] = [];
  const valid = new Set<string>();
  (pod.spec.volumes ?? []).forEach((volume, index) => {
    const before = errors.length;
    (volume.projected?.sources ?? []).forEach((source, sourceIndex) => {
      const token = source.serviceAccountToken;
      if (token === undefined) return;
      const field = `spec.volumes[${index}].projected.sources[${sourceIndex}].serviceAccountToken.expirationSeconds`;
      const seconds = token.expirationSeconds;
      if (seconds !== undefined && seconds < 600)
        errors.push({
          field,
          reason: 'FieldValueInvalid',
          message: `Invalid value: ${seconds}: may not specify a duration less than 10 minutes`,
        });
      if (seconds !== undefined && seconds > MAX_PROJECTED_EXPIRATION)
        errors.push({
          field,
          reason: 'FieldValueInvalid',
          message: `Invalid value: ${seconds}: may not specify a duration larger than 2^32 seconds`,
        });
      if (!token.path)
        errors.push({
          field: `spec.volumes[${index}].projected.path`,
          reason: 'FieldValueRequired',
          message: 'Required value',
        });
    });
    if (errors.length === before) valid.add(volume.name);
  });
  (pod.spec.containers ?? []).forEach((container, index) => {
    (container.volumeMounts ?? []).forEach((mount, mountIndex) => {
      if (!valid.has(mount.name))
        errors.push({
          field: `spec.containers[${index}].volumeMounts[${mountIndex}].name`,
          reason: 'FieldValueNotFound',
          message: `Not found: ${JSON.stringify(mount.name)}`,
        });
    });
  });
  return errors;
}

/** The volume defaults the apiserver applies before validating (file modes, token lifetime). */
function defaultVolumes(pod: Pod): void {
  for (const volume of pod.spec.volumes ?? []) {
    if (volume.secret) volume.secret.defaultMode ??= 420;
    if (volume.configMap) volume.configMap.defaultMode ??= 420;
    if (volume.projected) {
      volume.projected.defaultMode ??= 420;
      for (const source of volume.projected.sources ?? []) {
        if (source.serviceAccountToken) source.serviceAccountToken.expirationSeconds ??= 3600;
        for (const item of source.downwardAPI?.items ?? [])
          if (item.fieldRef) item.fieldRef.apiVersion ??= 'v1';
      }
    }
  }
}

function applyDefaults(pod: Pod): void {
  const spec = pod.spec;
  spec.restartPolicy ??= 'Always';
  spec.terminationGracePeriodSeconds ??= DEFAULT_GRACE_SECONDS;
  spec.schedulerName ??= 'default-scheduler';
  spec.serviceAccountName ??= spec.serviceAccount ?? 'default';
  spec.serviceAccount = spec.serviceAccountName;
  for (const container of [...spec.containers, ...(spec.initContainers ?? [])]) {
    container.terminationMessagePath ??= '/dev/termination-log';
  }
  pod.status = {
    phase: 'Pending',
    qosClass: qosClass(pod),
  };
}

function qosClass(pod: Pod): string {
  const containers = pod.spec.containers;
  const anySet = containers.some((c) => c.resources?.requests || c.resources?.limits);
  if (!anySet) return 'BestEffort';
  const guaranteed = containers.every((c) => {
    const limits = c.resources?.limits ?? {};
    const requests = c.resources?.requests ?? limits;
    return (
      limits.cpu !== undefined &&
      limits.memory !== undefined &&
      requests.cpu === limits.cpu &&
      requests.memory === limits.memory
    );
  });
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

/**
 * The ServiceAccount admission plugin: the pod's service account must exist, and unless
 * automounting is off (on the pod or the ServiceAccount) the API-access projected volume is added.
 */
function admitServiceAccount(pod: Pod, context: ApiContext): void {
  const namespace = pod.metadata.namespace ?? '';
  const name = pod.spec.serviceAccountName ?? 'default';
  const serviceAccount = context.store.get(context.type('', 'serviceaccounts'), namespace, name);
  if (serviceAccount === undefined) {
    throw forbidden(
      context.type('', 'pods'),
      pod.metadata.name,
      `error looking up service account ${namespace}/${name}: serviceaccount "${name}" not found`,
    );
  }
  const automount =
    pod.spec.automountServiceAccountToken ??
    (serviceAccount.automountServiceAccountToken as boolean | undefined) ??
    true;
  if (!automount) return;
  const volumeName = `kube-api-access-${Math.random().toString(36).slice(2, 7)}`;
  pod.spec.volumes = [
    ...(pod.spec.volumes ?? []),
    {
      name: volumeName,
      projected: {
        defaultMode: 420,
        sources: [
          { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          {
            downwardAPI: {
              items: [
                {
                  path: 'namespace',
                  fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' },
                },
              ],
            },
          },
        ],
      },
    },
  ];
  for (const container of pod.spec.containers) {
    container.volumeMounts = [
      ...(container.volumeMounts ?? []),
      {
        name: volumeName,
        readOnly: true,
        mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
      },
    ];
  }
}

/** Pod Security Admission in enforce mode, from the namespace's pod-security label. */
function admitPodSecurity(pod: Pod, context: ApiContext): void {
  const owner = context.store.get(
    context.type('', 'namespaces'),
    undefined,
    pod.metadata.namespace ?? '',
  );
  const level = enforcedLevel(owner?.metadata.labels);
  const violations = podSecurityViolations(pod, level);
  if (violations.length > 0) {
    throw forbidden(
      context.type('', 'pods'),
      pod.metadata.name,
      `violates PodSecurity "${level}:latest": ${violations.join(', ')}`,
    );
  }
}

export const podBehaviour: ResourceBehaviour = {
  prepareCreate(object, context) {
    const pod = object as Pod;
    if (pod.spec !== undefined) defaultVolumes(pod);
    const errors = podFieldErrors(pod);
    if (errors.length > 0) throw invalid('Pod', '', pod.metadata.name ?? '', errors);
    applyDefaults(pod);
    admitServiceAccount(pod, context);
    admitPodSecurity(pod, context);
  },

  delete(current: KubeObject, options: DeleteOptions, context: ApiContext): KubeObject {
    const pod = current as Pod;
    const podType = context.type('', 'pods');
    const finished = pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
    let grace =
      options.gracePeriodSeconds ?? pod.spec.terminationGracePeriodSeconds ?? DEFAULT_GRACE_SECONDS;
    if (pod.spec.nodeName === undefined || finished) grace = 0;
    const now = context.clock.now();
    if (grace === 0 && (pod.metadata.finalizers ?? []).length === 0) {
      return context.store.remove(podType, pod.metadata.namespace, pod.metadata.name ?? '');
    }
    const deadline = now + grace * 1000;
    const existing = pod.metadata.deletionTimestamp;
    if (existing !== undefined && Date.parse(existing) <= deadline) return pod;
    pod.metadata.deletionTimestamp = rfc3339(deadline);
    pod.metadata.deletionGracePeriodSeconds = grace;
    return context.store.update(podType, pod);
  },
};
