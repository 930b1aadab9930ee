import type {
  V1Container,
  V1EnvVar,
  V1ResourceRequirements,
  V1SecurityContext,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';

/** Where the agent's writable volumes are mounted (the root filesystem is read-only). */
export const WORK_DIR = '/work';
export const TMP_DIR = '/tmp';
const CA_DIR = '/etc/leoflow/tls';

/** A ConfigMap holding the agent channel's CA certificate (public). */
export interface AgentCa {
  configMap: string;
  key: string;
}

/**
 * Who the agent process runs as. `user`: one non-root uid (and gid), which is what Pod Security
 * `restricted` admits. `root`: uid 0 with every capability dropped but `addCapabilities` (Pod
 * Security `baseline` at most) — the warm-pool worker that gives each attempt its own uid.
 */
export type AgentRunAs =
  { kind: 'user'; uid: number } | { kind: 'root'; addCapabilities: readonly string[] };

/**
 * The agent container's security context: never privileged, no privilege escalation, a
 * read-only root filesystem, every capability dropped (but a root worker's few), and the
 * runtime's default seccomp profile.
 */
export function agentSecurityContext(runAs: AgentRunAs): V1SecurityContext {
  const root = runAs.kind === 'root';
  const uid = root ? 0 : runAs.uid;
  return {
    runAsNonRoot: !root,
    runAsUser: uid,
    runAsGroup: uid,
    allowPrivilegeEscalation: false,
    privileged: false,
    readOnlyRootFilesystem: true,
    capabilities: root ? { drop: ['ALL'], add: [...runAs.addCapabilities] } : { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/**
 * The platform env every agent gets: where the control plane is, how often to beat, the
 * writable directories as its work dir, HOME and TMPDIR, and the channel's CA if there is one.
 * `own` (a builder's own LEOFLOW_* settings) goes after the heartbeat interval. Values are
 * settings and paths only, never a credential: a transport adds that, if anything.
 */
export function agentPlatformEnv(
  channel: { agentUrl: string; heartbeatIntervalMs: number; agentCa: AgentCa | null },
  own: Record<string, string>,
): Record<string, string> {
  const env: Record<string, string> = {
    LEOFLOW_AGENT_URL: channel.agentUrl,
    LEOFLOW_HEARTBEAT_INTERVAL_MS: String(channel.heartbeatIntervalMs),
    ...own,
    LEOFLOW_WORKDIR: WORK_DIR,
    HOME: WORK_DIR,
    TMPDIR: TMP_DIR,
  };
  if (channel.agentCa) env.NODE_EXTRA_CA_CERTS = `${CA_DIR}/${channel.agentCa.key}`;
  return env;
}

/**
 * The agent's filesystem beside its read-only root: emptyDirs for its work dir and /tmp, then
 * `extra` (in order), then the channel's CA ConfigMap mounted read-only. Returns the container's
 * mounts and the pod volumes behind them.
 */
export function agentVolumes(
  agentCa: AgentCa | null,
  extra: readonly { volume: V1Volume; mount: V1VolumeMount }[] = [],
): { volumeMounts: V1VolumeMount[]; volumes: V1Volume[] } {
  const volumeMounts: V1VolumeMount[] = [
    { name: 'work', mountPath: WORK_DIR },
    { name: 'tmp', mountPath: TMP_DIR },
    ...extra.map((e) => e.mount),
  ];
  const volumes: V1Volume[] = [
    { name: 'work', emptyDir: {} },
    { name: 'tmp', emptyDir: {} },
    ...extra.map((e) => e.volume),
  ];
  if (agentCa) {
    volumeMounts.push({ name: 'agent-ca', mountPath: CA_DIR, readOnly: true });
    volumes.push({
      name: 'agent-ca',
      configMap: { name: agentCa.configMap, items: [{ key: agentCa.key, path: agentCa.key }] },
    });
  }
  return { volumeMounts, volumes };
}

export interface AgentContainerInput {
  image: string;
  env: V1EnvVar[];
  /** absent: no resources key at all */
  resources?: V1ResourceRequirements;
  volumeMounts: V1VolumeMount[];
  runAs: AgentRunAs;
}

/**
 * The locked-down agent container (named `agent`: pod outcomes and the warm pools' pod state
 * find its status by that name). The agent writes why it stopped — a bootstrap failure, a warm
 * worker's WARM_WORKER_RECYCLE_MESSAGE (@leoflow/protocol), which the pool manager matches to
 * record a `survivor` recycle — as its termination message, which kubectl describe shows.
 */
export function agentContainer(input: AgentContainerInput): V1Container {
  return {
    name: 'agent',
    image: input.image,
    imagePullPolicy: 'IfNotPresent',
    env: input.env,
    ...(input.resources !== undefined ? { resources: input.resources } : {}),
    volumeMounts: input.volumeMounts,
    terminationMessagePolicy: 'FallbackToLogsOnError',
    securityContext: agentSecurityContext(input.runAs),
  };
}
