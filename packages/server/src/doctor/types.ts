import type { KubernetesExecutorConfig, ServerConfig } from '../config/server-config.js';
import type { UndeclaredUseSummary } from '../store/types.js';
import type { KeyringSource } from '../vault/load-keyring.js';
import type { AgentChannelMode } from '../rpc/agent-server.js';

/** The shapes of `leoflow doctor`'s report and of what it reads; the sections fill them in. */

export type CheckStatus = 'ok' | 'warn' | 'fail';

/** One health or posture check: a stable id, a status, and what to do next. */
export interface DoctorCheck {
  id: string;
  status: CheckStatus;
  message: string;
}

/** A residual exposure of this configuration, named in one plain sentence, and how to close it. */
export interface Exposure {
  id: string;
  sentence: string;
  remedy: string;
}

export interface FileInfo {
  /** permission bits (mode & 0o7777) */
  mode: number;
  uid: number;
  /** device id, to tell whether two files share a filesystem */
  dev: number;
  kind: 'file' | 'directory' | 'other';
}

/** What doctor needs of a store: read-only questions, then close. */
export interface DoctorStore {
  migrationStatus(): Promise<{ applied: string[]; pending: string[]; unknown?: string[] }>;
  /** SQLite: this connection's `PRAGMA secure_delete` (0 off, 1 on, 2 fast); absent elsewhere */
  secureDelete?(): Promise<number>;
  /** D5: per DAG, names read through the SDK without a declaration (absent: not reported) */
  undeclaredUse?(tenantId: string): Promise<UndeclaredUseSummary[]>;
  close(): Promise<void>;
}

/**
 * Everything doctor reads from the machine, injected so that every check is testable without
 * one. Nothing here writes: doctor never creates the data directory, a key or a database.
 */
export interface DoctorDeps {
  /** stat following symlinks; null when the path does not exist */
  stat(path: string): Promise<FileInfo | null>;
  /** a small text file (passwd, ptrace_scope, the admin token's claims); null when unreadable */
  readText(path: string): Promise<string | null>;
  /** the uid doctor runs as (taken to be the uid standalone runs as); null without uids */
  uid: number | null;
  env: Readonly<Record<string, string | undefined>>;
  /** the time, epoch ms (certificate expiry); Date.now when absent */
  now?(): number;
  /** opens (never creates, never migrates) the configured datastore */
  openStore(db: ServerConfig['database']): Promise<DoctorStore>;
  /**
   * Asks the cluster executor.kubernetes points at (its kubeconfig, or in-cluster) what the
   * control plane may do; absent = doctor does not contact a cluster.
   */
  kubernetesAccess?: (cfg: KubernetesExecutorConfig) => Promise<KubernetesAccessProbe>;
  /**
   * Probes the attempt sandbox as standalone would run it (the helper beside the agent entry);
   * absent = doctor reports no sandbox section.
   */
  sandboxPlan?: (cfg: ServerConfig['subprocess']) => SandboxPlan;
  /** a directory's names (the uid lock dir's range notes); null when unreadable */
  listDir?: (path: string) => Promise<string[] | null>;
}

export interface DoctorOptions {
  /** where a PostgreSQL URL came from: a flag is readable by every local user in the process list */
  databaseUrlSource?: 'flag' | 'env';
}

export type { AgentChannelMode } from '../rpc/agent-server.js';
import type { SandboxPlan } from '../executor/sandbox-plan.js';

export interface KeyFilePosture {
  file: string;
  /** octal permission bits, e.g. "0600"; null when the file does not exist */
  mode: string | null;
}

export interface Posture {
  secret_scoping: string;
  secret_liveness_mode: string;
  attempt_token_ttl: string;
  max_attempt_credential_lifetime: string;
  token_transport: {
    subprocess: string;
    kubernetes: string;
    /** auth.agent_token_transport as configured (used by the Kubernetes executor only) */
    configured: string;
    /** auth.exchange_bootstrap as configured (meaningful under exchange only) */
    exchange_bootstrap: string;
    warm_pools: string;
  };
  key_storage: {
    vault: {
      source: KeyringSource;
      /** the keyring file holding the current key, or null when it comes from the environment */
      file: string | null;
      mode: string | null;
      env_var: string | null;
      /** Lite's generated keyring, still loaded for older keys after switching to another source */
      older_keys_file: string | null;
    };
    agent_signing: KeyFilePosture;
    user_signing: KeyFilePosture;
    admin_token: KeyFilePosture & { expires: boolean | null };
  };
  agent_channel: { mode: AgentChannelMode; address: string; secrets_delivered: boolean };
  tasks_run_as: { isolated: boolean; user: string | null; uid: number | null; summary: string };
  /** how attempts are kept apart from each other, and which kernel limits bound them */
  isolation: IsolationPosture;
  /** the attempt sandbox in force (absent when doctor could not probe it) */
  sandbox?: SandboxPosture;
  exposures: Exposure[];
}

export interface IsolationPosture {
  /** per-attempt: a uid of its own per attempt; shared: one run-as user; none: this user */
  mode: 'per-attempt' | 'shared' | 'none';
  /** execution.attempt_uid_range in force (per-attempt mode), else null */
  attempt_uid_range: string | null;
  nproc_limit: { limit: number; enforced: boolean; detail: string };
  cgroup_limits: { enforced: boolean; detail: string };
  /** this installation's work root, or null when it cannot be told yet (no install id) */
  work_root: string | null;
  /** the @leoflow/sdk copy node tasks import; readable: by an unprivileged uid (null: unknown) */
  task_sdk: { file: string | null; readable: boolean | null };
}

export interface RedactedConfig {
  data_dir: string;
  tenant_id: string;
  database: { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string; schema?: string };
  http: { host: string; port: number };
  agent: {
    host: string;
    port: number;
    advertise_url: string | null;
    tls: { cert_file: string; key_file: string; ca_file: string | null } | null;
  };
  metrics: { host: string; port: number | null };
  dags_folder: string | null;
  vault_seed_dir: string | null;
  log_level: string;
  credentials: Record<string, string | boolean>;
  execution: {
    heartbeat_interval: string;
    agent_lost_threshold: string;
    dispatch_lost_threshold: string;
    attempt_uid_range: string | null;
    attempt_nproc_limit: number;
    run_as_user: string | null;
    standby_agents: number;
    work_dir: string | null;
  };
}

/** One setting as doctor reports it: its value (secrets redacted) and where it came from. */
export interface ReportedSetting {
  key: string;
  value: string;
  source: 'default' | 'file' | 'env' | 'flags';
  section: string;
}

export interface DoctorReport {
  edition: 'lite';
  config: RedactedConfig;
  /** every setting of the table with its source; absent when the configuration was built in code */
  settings?: ReportedSetting[];
  posture: Posture;
  checks: DoctorCheck[];
  summary: { ok: number; warn: number; fail: number };
}

/** One right the Kubernetes executor uses in a tenant's namespace. */
export interface KubernetesRight {
  verb: string;
  resource: string;
  subresource?: string;
}

/**
 * Asks the cluster, as the control plane's own identity, whether it may do something
 * (a SelfSubjectAccessReview). Throws when the cluster cannot be asked at all.
 */
export interface KubernetesAccessProbe {
  allowed(namespace: string, right: KubernetesRight): Promise<boolean>;
}

/** The attempt sandbox as doctor found it (doctor/sandbox.ts). */
export interface SandboxPosture {
  mode: SandboxPlan['mode'] | 'unknown';
  isolation: SandboxPlan['isolation'];
  network: SandboxPlan['network'];
  helper: string | null;
  landlock: boolean;
  world_writable: string[];
  why: string | null;
}
