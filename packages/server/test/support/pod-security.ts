/**
 * Pod Security Admission `restricted` (Kubernetes pod security standards, v1.32), checked on a
 * pod spec the way the admission plugin evaluates it: every control of the baseline and
 * restricted levels that a pod template can violate. Returns the violations (empty = admitted).
 */
type Obj = Record<string, unknown>;

const ALLOWED_VOLUME_TYPES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);

const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);

export function restrictedViolations(podSpec: Obj, where = 'spec'): string[] {
  const out: string[] = [];
  const psc = (podSpec.securityContext ?? {}) as Obj;
  for (const k of ['hostNetwork', 'hostPID', 'hostIPC'])
    if (podSpec[k] === true) out.push(`${where}.${k} is true`);
  for (const v of (podSpec.volumes ?? []) as Obj[]) {
    const types = Object.keys(v).filter((k) => k !== 'name');
    for (const t of types)
      if (!ALLOWED_VOLUME_TYPES.has(t)) out.push(`${where}.volumes[${String(v.name)}] is ${t}`);
  }
  for (const s of (psc.sysctls ?? []) as Obj[])
    if (!SAFE_SYSCTLS.has(String(s.name))) out.push(`${where} sets sysctl ${String(s.name)}`);
  const podSeccomp = (psc.seccompProfile as Obj | undefined)?.type;
  if (podSeccomp === 'Unconfined')
    out.push(`${where}.securityContext.seccompProfile is Unconfined`);
  if (psc.runAsUser === 0) out.push(`${where}.securityContext.runAsUser is 0`);
  const containers = [
    ...((podSpec.initContainers ?? []) as Obj[]),
    ...((podSpec.containers ?? []) as Obj[]),
    ...((podSpec.ephemeralContainers ?? []) as Obj[]),
  ];
  for (const c of containers) {
    const at = `${where}.containers[${String(c.name)}]`;
    const sc = (c.securityContext ?? {}) as Obj;
    if (sc.privileged === true) out.push(`${at} is privileged`);
    if (sc.allowPrivilegeEscalation !== false)
      out.push(`${at}.securityContext.allowPrivilegeEscalation is not false`);
    const caps = (sc.capabilities ?? {}) as Obj;
    if (!((caps.drop ?? []) as string[]).includes('ALL'))
      out.push(`${at}.securityContext.capabilities.drop does not include ALL`);
    for (const a of (caps.add ?? []) as string[])
      if (a !== 'NET_BIND_SERVICE') out.push(`${at} adds capability ${a}`);
    const nonRoot = sc.runAsNonRoot ?? psc.runAsNonRoot;
    if (nonRoot !== true) out.push(`${at}: runAsNonRoot is not true (pod or container)`);
    if (sc.runAsUser === 0) out.push(`${at}.securityContext.runAsUser is 0`);
    const seccomp = ((sc.seccompProfile as Obj | undefined)?.type ?? podSeccomp) as
      string | undefined;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost')
      out.push(`${at}: seccompProfile is not RuntimeDefault or Localhost`);
    if (sc.procMount !== undefined && sc.procMount !== 'Default')
      out.push(`${at}.securityContext.procMount is ${JSON.stringify(sc.procMount)}`);
    for (const p of (c.ports ?? []) as Obj[])
      if (p.hostPort !== undefined && p.hostPort !== 0)
        out.push(`${at} uses hostPort ${JSON.stringify(p.hostPort)}`);
  }
  return out;
}
