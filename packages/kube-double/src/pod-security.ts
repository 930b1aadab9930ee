// Pod Security Admission, enforce mode: a namespace labelled
// pod-security.kubernetes.io/enforce=baseline|restricted refuses a pod that violates that level
// with the 403 the admission plugin gives (`violates PodSecurity "restricted:latest": ...`). The
// checks are those of the documented Pod Security Standards for these levels; warn and audit modes
// and version pinning (`enforce-version`) are not implemented (every level is `latest`).
import type { Container, Pod } from './objects.js';

interface SecurityContext {
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  runAsNonRoot?: boolean;
  runAsUser?: number;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type?: string };
}

const BASELINE_CAPABILITIES = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const RESTRICTED_VOLUME_TYPES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);

type Level = 'privileged' | 'baseline' | 'restricted';

function quoted(names: string[]): string {
  return names.map((name) => `"${name}"`).join(', ');
}

function containersOf(pod: Pod): Container[] {
  return [...(pod.spec.initContainers ?? []), ...pod.spec.containers];
}

function contextOf(container: Container): SecurityContext {
  return (container as { securityContext?: SecurityContext }).securityContext ?? {};
}

/** The violations of `level`, each in the admission plugin's "check (detail)" form. */
export function podSecurityViolations(pod: Pod, level: Level): string[] {
  if (level === 'privileged') return [];
  const violations: string[] = [];
  const spec = pod.spec as Pod['spec'] & {
    hostNetwork?: boolean;
    hostPID?: boolean;
    hostIPC?: boolean;
    securityContext?: SecurityContext;
  };
  const containers = containersOf(pod);
  const hostNamespaces = (['hostNetwork', 'hostPID', 'hostIPC'] as const).filter(
    (field) => spec[field] === true,
  );
  if (hostNamespaces.length > 0) {
    violations.push(
      `host namespaces (${hostNamespaces.map((field) => `${field}=true`).join(', ')})`,
    );
  }
  const privileged = containers.filter((c) => contextOf(c).privileged === true).map((c) => c.name);
  if (privileged.length > 0) {
    violations.push(
      `privileged (${privileged.length > 1 ? 'containers' : 'container'} ${quoted(privileged)} must not set securityContext.privileged=true)`,
    );
  }
  const extraCapabilities = containers.flatMap((c) =>
    (contextOf(c).capabilities?.add ?? [])
      .filter((cap) => !BASELINE_CAPABILITIES.has(cap))
      .map((cap) => ({ name: c.name, cap })),
  );
  if (extraCapabilities.length > 0) {
    violations.push(
      `non-default capabilities (${extraCapabilities.map(({ name, cap }) => `container "${name}" must not include "${cap}" in securityContext.capabilities.add`).join('; ')})`,
    );
  }
  const hostPaths = (pod.spec.volumes ?? [])
    .filter((v) => v.hostPath !== undefined)
    .map((v) => v.name);
  if (hostPaths.length > 0)
    violations.push(
      `hostPath volumes (${hostPaths.length > 1 ? 'volumes' : 'volume'} ${quoted(hostPaths)})`,
    );
  const hostPorts = containers.flatMap((c) =>
    ((c as { ports?: { hostPort?: number }[] }).ports ?? [])
      .filter((p) => (p.hostPort ?? 0) > 0)
      .map((p) => `container "${c.name}" uses hostPort ${p.hostPort ?? 0}`),
  );
  if (hostPorts.length > 0) violations.push(`hostPort (${hostPorts.join(', ')})`);
  if (level === 'baseline') return violations;

  const escalating = containers
    .filter((c) => contextOf(c).allowPrivilegeEscalation !== false)
    .map((c) => c.name);
  if (escalating.length > 0) {
    violations.push(
      `allowPrivilegeEscalation != false (${escalating.length > 1 ? 'containers' : 'container'} ${quoted(escalating)} must set securityContext.allowPrivilegeEscalation=false)`,
    );
  }
  const capabilityProblems: string[] = [];
  const notDropped = containers
    .filter((c) => !(contextOf(c).capabilities?.drop ?? []).includes('ALL'))
    .map((c) => c.name);
  if (notDropped.length > 0) {
    capabilityProblems.push(
      `${notDropped.length > 1 ? 'containers' : 'container'} ${quoted(notDropped)} must set securityContext.capabilities.drop=["ALL"]`,
    );
  }
  for (const c of containers) {
    const added = (contextOf(c).capabilities?.add ?? []).filter(
      (cap) => cap !== 'NET_BIND_SERVICE',
    );
    if (added.length > 0)
      capabilityProblems.push(
        `container "${c.name}" must not include ${quoted(added)} in securityContext.capabilities.add`,
      );
  }
  if (capabilityProblems.length > 0)
    violations.push(`unrestricted capabilities (${capabilityProblems.join('; ')})`);
  const restrictedVolumes = (pod.spec.volumes ?? []).flatMap((volume) => {
    const kind = Object.keys(volume).find((key) => key !== 'name');
    return kind !== undefined && !RESTRICTED_VOLUME_TYPES.has(kind)
      ? [`volume "${volume.name}" uses restricted volume type "${kind}"`]
      : [];
  });
  if (restrictedVolumes.length > 0)
    violations.push(`restricted volume types (${restrictedVolumes.join(', ')})`);
  // runAsNonRoot: an explicit false (pod or container) is reported before an unset one.
  const podSetting = spec.securityContext?.runAsNonRoot;
  const podNonRoot = podSetting === true;
  const explicitlyFalse = containers
    .filter((c) => contextOf(c).runAsNonRoot === false)
    .map((c) => c.name);
  const implicitlyUnset = containers
    .filter((c) => contextOf(c).runAsNonRoot === undefined && !podNonRoot)
    .map((c) => c.name);
  const badSetters = [
    ...(podSetting === false ? ['pod'] : []),
    ...(explicitlyFalse.length > 0
      ? [`${explicitlyFalse.length > 1 ? 'containers' : 'container'} ${quoted(explicitlyFalse)}`]
      : []),
  ];
  if (badSetters.length > 0) {
    violations.push(
      `runAsNonRoot != true (${badSetters.join(' and ')} must not set securityContext.runAsNonRoot=false)`,
    );
  } else if (implicitlyUnset.length > 0) {
    violations.push(
      `runAsNonRoot != true (pod or ${implicitlyUnset.length > 1 ? 'containers' : 'container'} ${quoted(implicitlyUnset)} must set securityContext.runAsNonRoot=true)`,
    );
  }
  const root = containers
    .filter((c) => (contextOf(c).runAsUser ?? spec.securityContext?.runAsUser) === 0)
    .map((c) => c.name);
  if (root.length > 0)
    violations.push(
      `runAsUser=0 (${root.length > 1 ? 'containers' : 'container'} ${quoted(root)} must not set runAsUser=0)`,
    );
  const allowedSeccomp = (type: string | undefined) =>
    type === 'RuntimeDefault' || type === 'Localhost';
  const podSeccomp = spec.securityContext?.seccompProfile?.type;
  const noSeccomp = containers
    .filter((c) => {
      const own = contextOf(c).seccompProfile?.type;
      return own !== undefined ? !allowedSeccomp(own) : !allowedSeccomp(podSeccomp);
    })
    .map((c) => c.name);
  if (noSeccomp.length > 0) {
    violations.push(
      `seccompProfile (pod or ${noSeccomp.length > 1 ? 'containers' : 'container'} ${quoted(noSeccomp)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`,
    );
  }
  return violations;
}

export function enforcedLevel(namespaceLabels: Record<string, string> | undefined): Level {
  const value = namespaceLabels?.['pod-security.kubernetes.io/enforce'];
  return value === 'baseline' || value === 'restricted' ? value : 'privileged';
}
