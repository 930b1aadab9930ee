import type { KubernetesTenantConfig } from './kubernetes-tenant-config.js';
import type { WarmPoolConfig } from './warm-pool-config.js';
import {
  DEFAULT_ATTEMPT_NPROC_LIMIT,
  DEFAULT_ATTEMPT_UID_RANGE,
  DEFAULT_ISOLATION_MODE,
  DEFAULT_NETWORK_MODE,
  DEFAULT_SANDBOX_TMPFS_SIZE,
  type IsolationMode,
  type NetworkMode,
  DEFAULT_CREDENTIAL_PLANE_CONFIG,
  type ConfigSource,
  type CredentialPlaneConfig,
  type SettingValue,
} from '@leoflow/core';
import { defaultPythonSdk, defaultSdkBundle } from './sdk-bundle.js';
import { join, resolve } from 'node:path';
import { DEFAULT_LOG_LIMITS, type LogLimits } from './log-limits.js';
import type { ProServerConfig } from './pro-config.js';

/**
 * The effective configuration of a control-plane process. Operator-scoped: nothing here is
 * settable by a DAG author. Precedence (applied by the CLI): defaults < env < flags.
 */
export interface ServerConfig {
  dataDir: string;
  dagsFolder: string | null;
  /** dags.paused_at_creation: a DAG registered for the first time starts paused */
  dagsPausedAtCreation: boolean;
  /** how often the DAGs folder is polled when fs.watch is unavailable or misses a change */
  dagsFolderPollMs: number;
  http: { host: string; port: number };
  agent: {
    host: string;
    port: number;
    /**
     * The URLs agents dial (agent.advertise_url: every replica's agent URL, or one address in
     * front of them all); derived from host/port (and TLS) when null
     */
    advertiseUrls: string[] | null;
    /** TLS for the agent channel: PEM files. The CA file is handed to agents so they trust the cert. */
    tls: { certFile: string; keyFile: string; caFile: string | null } | null;
  };
  database: { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string; schema?: string };
  tenantId: string;
  /** the credential plane's operator settings (validated in core at boot) */
  credentials: CredentialPlaneConfig;
  /** Prometheus listener on 127.0.0.1; port 0 picks a free one, null disables it */
  metrics: {
    host: string;
    port: number | null;
    /**
     * Lite, when the operator did not choose the port: a default port another installation
     * holds is replaced by a free one (and logged). A port given explicitly is never replaced.
     */
    freePortIfDefaultTaken?: boolean;
  };
  /** dev convenience: import Airflow-format connections/variables files from here at start */
  vaultSeedDir: string | null;
  execution: {
    heartbeatIntervalMs: number;
    agentLostThresholdMs: number;
    dispatchLostThresholdMs: number;
    /** extra time the control plane grants past execution_timeout before it steps in itself */
    timeoutGraceMs: number;
    schedulerTickMs: number;
  };
  /**
   * The subprocess executor's own section (one agent process per attempt on this host). Its
   * settings keep their execution.* names (execution.attempt_uid_range, --standby-agents…) for
   * compatibility; they mean nothing to any other executor.
   */
  subprocess: SubprocessExecutorConfig;
  /**
   * The runner door (docs/runners.md). Lite runs it in-process on its own port when port is not
   * null, so nothing else ever answers under /runners/. publicUrl is what launch commands name
   * (default: http://<host>:<bound port>).
   */
  door: {
    host: string;
    port: number | null;
    publicUrl: string | null;
    /**
     * A cell's internal endpoint for doors (connection secrets, session upgrades), on its own
     * port; null: only when Lite runs its own door, on an ephemeral loopback port.
     */
    cellPort: number | null;
    cellHost: string;
    /**
     * This cell's name in the directory (directory topology): it accepts a runner session only
     * when the runner's tenant is placed on this name. null there refuses every session; Lite's
     * one implicit cell serves every tenant and needs none.
     */
    cellName: string | null;
    /** the public keys of the doors this cell trusts (a door's door-public.jwks.json) */
    trustedKeysFile: string | null;
  };
  /** Pro: the PostgreSQL schema of the directory (runners, cells, placements); never a cell's */
  directory: { schema: string };
  /**
   * The Kubernetes executor's section (executor.kubernetes): one pod per attempt. null = not
   * configured; tasks that name `executor: kubernetes` are then refused at registration.
   */
  kubernetes: KubernetesExecutorConfig | null;
  /** which configured executor starts tasks that name none (executor.default) */
  defaultExecutor: string;
  /** caps on what agents' PushLogs store */
  logs: LogLimits;
  logLevel: string;
  /** `leoflow server` (Pro): role, scheduler lease, drain; absent for Lite's standalone */
  pro?: ProServerConfig;
  /**
   * Every setting of core's table with where its value came from (default, file, env, flags),
   * as the CLI resolved it; `leoflow doctor` reports it. Absent for a configuration built in code.
   */
  settings?: { values: Record<string, SettingValue>; sources: Record<string, ConfigSource> };
}

export interface SubprocessExecutorConfig {
  /**
   * execution.attempt_uid_range, "first-last": when root, every attempt runs under its own uid
   * and gid from this range. null ("off") falls back to the one shared runAsUser.
   */
  attemptUidRange: string | null;
  /** execution.attempt_nproc_limit: RLIMIT_NPROC of each attempt's uid; 0 = not applied */
  attemptNprocLimit: number;
  /**
   * The attempt sandbox (docs/security.md, "The sandbox"), kept together for the settings table:
   * execution.isolation (auto | required | fallback), execution.network (host | none),
   * execution.writable_paths (bind-mounted read-write into every attempt), execution.tmpfs_size
   * (bytes, each private tmpfs).
   */
  isolation: IsolationMode;
  network: NetworkMode;
  writablePaths: string[];
  tmpfsSizeBytes: number;
  /** the shared user attempts run as when root and attemptUidRange is off; null = do not drop */
  runAsUser: string | null;
  /** the work root; null = the per-install default, /tmp/leoflow-work-<install id> */
  workDir: string | null;
  agentEntry: string;
  /**
   * The self-contained @leoflow/sdk bundle copied under the work root for node tasks; null when
   * not built, then node tasks resolve from taskNodeModules instead.
   */
  sdkBundle: string | null;
  /** fallback node_modules for node tasks when there is no SDK bundle (the installation's) */
  taskNodeModules: string | null;
  /**
   * The Python task SDK's package folder (`leoflow/`), copied under the work root for python
   * tasks (PYTHONPATH); null when the installation has none.
   */
  pythonSdk: string | null;
  /** pre-started, credential-less agents waiting for an attempt; 0 starts each on demand */
  standbyAgents: number;
  /**
   * execution.host_agent on: one long-lived host agent (executor/host-agent-executor.ts) takes
   * every local attempt instead of one agent process each
   */
  hostAgent: boolean;
  keepWorkDirs: boolean;
}

export interface KubernetesExecutorConfig {
  /** a kubeconfig file; null = in-cluster (the control plane's own service account) */
  kubeconfig: string | null;
  /** the agent's image (deploy/agent.Dockerfile); the default image of every tenant */
  agentImage: string;
  /**
   * The URL task pods dial to reach the agent port (the agent Service), e.g.
   * https://leoflow-agent.leoflow.svc:8793; null = the control plane's own agent URL.
   */
  agentUrl: string | null;
  /** a pod not running by then (scheduling, image pull) fails its attempt; until then its claim is kept */
  podStartTimeoutMs: number;
  /** names this control plane on its pods (leoflow.io/instance), so installations sharing a namespace never adopt each other's */
  instance: string;
  /** the non-root uid the agent runs as (the agent image's user) */
  runAsUser: number;
  terminationGracePeriodSeconds: number;
  /** a ConfigMap with the agent channel's CA certificate (public), mounted into task pods */
  agentCaConfigMap: { name: string; key: string } | null;
  /** keep finished pods (for debugging) instead of deleting them once their outcome is recorded */
  keepFinishedPods: boolean;
  /** per-tenant placement and allowlist, by tenant id */
  tenants: Record<string, KubernetesTenantConfig>;
  /** executor.kubernetes.warm_pools; used only when execution.warm_pools_enabled is true */
  warmPools?: WarmPoolConfig[];
  /** executor.kubernetes.warm_pool_reconcile_interval: how often pools are topped up and checked */
  warmPoolReconcileIntervalMs?: number;
}

export function defaultServerConfig(dataDir: string): ServerConfig {
  const abs = resolve(dataDir);
  return {
    dataDir: abs,
    dagsFolder: null,
    dagsPausedAtCreation: true,
    dagsFolderPollMs: 2000,
    http: { host: '127.0.0.1', port: 8080 },
    agent: { host: '127.0.0.1', port: 8793, advertiseUrls: null, tls: null },
    database: { kind: 'sqlite', file: join(abs, 'leoflow.db') },
    tenantId: 'default',
    credentials: { ...DEFAULT_CREDENTIAL_PLANE_CONFIG },
    metrics: { host: '127.0.0.1', port: 9464 },
    vaultSeedDir: null,
    execution: {
      heartbeatIntervalMs: 15_000,
      agentLostThresholdMs: 90_000,
      dispatchLostThresholdMs: 180_000,
      timeoutGraceMs: 30_000,
      schedulerTickMs: 250,
    },
    subprocess: {
      attemptUidRange: DEFAULT_ATTEMPT_UID_RANGE,
      attemptNprocLimit: DEFAULT_ATTEMPT_NPROC_LIMIT,
      isolation: DEFAULT_ISOLATION_MODE,
      network: DEFAULT_NETWORK_MODE,
      writablePaths: [],
      tmpfsSizeBytes: DEFAULT_SANDBOX_TMPFS_SIZE,
      runAsUser: 'nobody',
      workDir: null,
      agentEntry: defaultAgentEntry(),
      sdkBundle: defaultSdkBundle(),
      pythonSdk: defaultPythonSdk(),
      standbyAgents: 2,
      hostAgent: false,
      taskNodeModules: resolve(new URL('.', import.meta.url).pathname, '../../../../node_modules'),
      keepWorkDirs: false,
    },
    door: {
      host: '127.0.0.1',
      port: null,
      publicUrl: null,
      cellPort: null,
      cellHost: '127.0.0.1',
      cellName: null,
      trustedKeysFile: null,
    },
    directory: { schema: 'leoflow_directory' },
    kubernetes: null,
    defaultExecutor: 'subprocess',
    logs: { ...DEFAULT_LOG_LIMITS },
    logLevel: 'info',
  };
}

/**
 * The agent as one bundled file: loading one module instead of a few hundred cuts its cold start
 * (and the CPU every attempt pays) by more than half (see bench/, inter_task_latency).
 */
function defaultAgentEntry(): string {
  // packages/server/dist/config → packages/agent/dist/leoflow-agent.mjs
  return resolve(new URL('.', import.meta.url).pathname, '../../../agent/dist/leoflow-agent.mjs');
}

/** The address this process's agent port answers on, as an agent would dial it. */
export function listenAgentUrl(cfg: ServerConfig, boundPort: number): string {
  return `${cfg.agent.tls ? 'https' : 'http'}://${cfg.agent.host}:${boundPort}`;
}

/**
 * The URLs agents dial, in the order an agent tries them: the advertised list with this
 * replica's own agent URL first when the list names it (the replica that starts an agent is
 * alive at that moment), else the list as given; this replica's own URL when nothing is
 * advertised.
 */
export function agentUrls(cfg: ServerConfig, boundPort: number): string[] {
  const own = listenAgentUrl(cfg, boundPort);
  const listed = cfg.agent.advertiseUrls;
  if (listed === null || listed.length === 0) return [own];
  const unique = [...new Set(listed)];
  const mine = unique.findIndex((u) => u.replace(/\/+$/, '') === own);
  return mine <= 0 ? unique : [unique[mine]!, ...unique.filter((_, i) => i !== mine)];
}

/** agentUrls as the one value agents receive (LEOFLOW_AGENT_URL): comma-separated. */
export function agentUrl(cfg: ServerConfig, boundPort: number): string {
  return agentUrls(cfg, boundPort).join(',');
}
