import { dirname, join } from 'node:path';
import {
  agentTokenTtlSeconds,
  ATTEMPT_UID_RANGE_KEY,
  formatDuration,
  isLeoflowError,
  parseUidRange,
  uidRangeCollisionMessage,
  uidRangeCollisions,
} from '@leoflow/core';
import { keyringFile } from '../auth/signing-keys.js';
import type { ServerConfig } from '../config/server-config.js';
import { ADMIN_TOKEN_FILE } from '../config/data-dir-layout.js';
import { isLoopbackHost } from '../credentials/secret-delivery.js';
import { INSTALL_ID_FILE, SDK_ENTRY, workRootFor } from '../executor/work-root.js';
import {
  liteKeyringPath,
  SECRET_KEY_ENV,
  SECRET_KEY_PREVIOUS_ENV,
  SECRET_KEYRING_FILE_ENV,
  type KeyringSource,
} from '../vault/load-keyring.js';
import { parseSecretKey } from '../vault/secret-key.js';
import type { UndeclaredUseSummary } from '../store/types.js';
import { databaseUrlHasPassword, databaseUrlSecrets, redactDatabaseUrl, scrub } from './redact.js';

const PASSWD_FILE = '/etc/passwd';
const PTRACE_SCOPE_FILE = '/proc/sys/kernel/yama/ptrace_scope';

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
  migrationStatus(): Promise<{ applied: string[]; pending: string[] }>;
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
  /** opens (never creates, never migrates) the configured datastore */
  openStore(db: ServerConfig['database']): Promise<DoctorStore>;
}

export interface DoctorOptions {
  /** where a PostgreSQL URL came from: a flag is readable by every local user in the process list */
  databaseUrlSource?: 'flag' | 'env';
}

export type AgentChannelMode = 'tls' | 'cleartext-loopback' | 'cleartext-non-loopback';

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

export interface DoctorReport {
  edition: 'lite';
  config: RedactedConfig;
  posture: Posture;
  checks: DoctorCheck[];
  summary: { ok: number; warn: number; fail: number };
}

export const SUBPROCESS_TOKEN_TRANSPORT = 'inherited pipe fd 3, memory only';
export const KUBERNETES_TOKEN_TRANSPORT = 'not available in this build';

/**
 * Builds `leoflow doctor`'s report for a Lite configuration: the effective settings (secrets
 * redacted), the credential plane's posture with every residual exposure, and health checks.
 * Read-only: it stats files and opens the datastore, nothing else.
 */
export async function buildDoctorReport(
  cfg: ServerConfig,
  deps: DoctorDeps,
  opts: DoctorOptions = {},
): Promise<DoctorReport> {
  const checks: DoctorCheck[] = [];
  const exposures: Exposure[] = [];
  const check = (id: string, status: CheckStatus, message: string) =>
    checks.push({ id, status, message });
  const expose = (id: string, sentence: string, remedy: string) =>
    exposures.push({ id, sentence, remedy });
  const stat = safeStat(deps);

  const dataDir = cfg.dataDir;
  const keysDir = join(dataDir, 'keys');
  const sqliteFile = cfg.database.kind === 'sqlite' ? cfg.database.file : null;

  // ---------------------------------------------------------------- data directory
  const dirInfo = await stat(dataDir);
  const dataDirExists = dirInfo.info?.kind === 'directory';
  if (dirInfo.error !== undefined) {
    check(
      'data_dir.exists',
      'fail',
      `cannot inspect ${dataDir} (${dirInfo.error}); run doctor as the user that runs leoflow standalone`,
    );
  } else if (dirInfo.info === null) {
    check(
      'data_dir.exists',
      'fail',
      `${dataDir} does not exist: run \`leoflow standalone --data-dir ${sh(dataDir)}\` once to create it, or pass --data-dir (or LEOFLOW_DATA_DIR) naming the directory standalone uses. Doctor never creates it.`,
    );
  } else if (!dataDirExists) {
    check(
      'data_dir.exists',
      'fail',
      `${dataDir} is not a directory: pass --data-dir naming the directory standalone uses`,
    );
  } else {
    check('data_dir.exists', 'ok', `${dataDir} exists`);
    const info = dirInfo.info;
    if ((info.mode & 0o077) !== 0) {
      check(
        'data_dir.mode',
        'fail',
        `${dataDir} is mode ${octal(info.mode)}: other users can reach the keys, the admin token and the database; run \`chmod 700 ${sh(dataDir)}\``,
      );
    } else {
      check('data_dir.mode', 'ok', `${dataDir} is mode ${octal(info.mode)} (owner only)`);
    }
    ownerCheck('data_dir.owner', dataDir, info, deps.uid, check);
  }

  // ---------------------------------------------------------------- key storage
  const vault = vaultKeySource(deps.env, dataDir);
  const files = {
    agent: keyringFile(dataDir, 'agent'),
    user: keyringFile(dataDir, 'user'),
    admin: join(dataDir, ADMIN_TOKEN_FILE),
  };
  const modes = new Map<string, FileInfo | null>();
  const fileCheck = async (
    id: string,
    paths: readonly string[],
    required: boolean,
    what: string,
  ): Promise<void> => {
    const [main] = paths;
    if (main === undefined) return;
    const found: { path: string; info: FileInfo }[] = [];
    for (const p of paths) {
      const r = await stat(p);
      if (r.error !== undefined) {
        check(
          id,
          'fail',
          `cannot inspect ${p} (${r.error}); run doctor as the user that runs leoflow standalone`,
        );
        return;
      }
      modes.set(p, r.info);
      if (r.info !== null) found.push({ path: p, info: r.info });
    }
    if (!found.some((f) => f.path === main)) {
      check(
        id,
        required ? 'fail' : 'warn',
        required
          ? `${main} (${what}) does not exist: standalone refuses to start without it; fix the path or create it (mode 0600)`
          : `${main} (${what}) does not exist yet: \`leoflow standalone\` creates it (mode 0600) on first start`,
      );
      return;
    }
    for (const f of found) {
      if (f.info.kind !== 'file') {
        check(
          id,
          'fail',
          `${f.path} (${what}) is not a regular file: move it aside and let standalone recreate it`,
        );
        return;
      }
      if ((f.info.mode & 0o077) !== 0) {
        check(
          id,
          'fail',
          `${f.path} (${what}) is mode ${octal(f.info.mode)}, readable or writable by others: run \`chmod 600 ${sh(f.path)}\``,
        );
        return;
      }
      if (deps.uid !== null && f.info.uid !== deps.uid) {
        check(
          id,
          'fail',
          `${f.path} (${what}) is owned by uid ${f.info.uid}, not by the user running doctor (uid ${deps.uid}): run \`chown ${deps.uid} ${sh(f.path)}\` or run doctor as the user that runs standalone`,
        );
        return;
      }
    }
    check(
      id,
      'ok',
      `${found.map((f) => `${f.path} ${octal(f.info.mode)}`).join(', ')} (${what}): owner only`,
    );
  };

  if (dataDirExists) {
    const keys = await stat(keysDir);
    const k = keys.info;
    if (keys.error !== undefined) {
      check('keys_dir.mode', 'fail', `cannot inspect ${keysDir} (${keys.error})`);
    } else if (k === null) {
      check(
        'keys_dir.mode',
        'warn',
        `${keysDir} does not exist yet: \`leoflow standalone\` creates it (mode 0700) on first start`,
      );
    } else if (k.kind !== 'directory') {
      check(
        'keys_dir.mode',
        'fail',
        `${keysDir} is not a directory: move it aside and let standalone recreate it`,
      );
    } else if ((k.mode & 0o077) !== 0) {
      check(
        'keys_dir.mode',
        'fail',
        `${keysDir} is mode ${octal(k.mode)}: run \`chmod 700 ${sh(keysDir)}\``,
      );
    } else {
      check('keys_dir.mode', 'ok', `${keysDir} is mode ${octal(k.mode)} (owner only)`);
    }
  }
  // A keyring file named by LEOFLOW_SECRET_KEYRING_FILE may live outside the data dir.
  if (vault.file !== null && (dataDirExists || !isInside(vault.file, dataDir))) {
    await fileCheck(
      'key_file.vault_keyring',
      [vault.file],
      vault.source === 'keyring-file',
      'vault keyring',
    );
  }
  if (vault.olderKeysFile !== null && dataDirExists) {
    // Lite keeps loading its generated keyring for older keys after a switch to another source.
    const older = await stat(vault.olderKeysFile);
    modes.set(vault.olderKeysFile, older.info);
    if (older.info !== null) {
      await fileCheck(
        'key_file.vault_older_keys',
        [vault.olderKeysFile],
        false,
        'older vault keys',
      );
    }
  }
  if (dataDirExists) {
    await fileCheck(
      'key_file.agent_signing_keys',
      [files.agent],
      false,
      'agent token signing keys',
    );
    await fileCheck('key_file.user_signing_keys', [files.user], false, 'API token signing keys');
    await fileCheck('key_file.admin_token', [files.admin], false, 'admin token');
    if (sqliteFile !== null) {
      await fileCheck(
        'key_file.database',
        [sqliteFile, `${sqliteFile}-wal`, `${sqliteFile}-shm`],
        false,
        'SQLite database',
      );
    }
  }
  if (cfg.agent.tls !== null) {
    await fileCheck(
      'key_file.agent_tls_key',
      [cfg.agent.tls.keyFile],
      true,
      'agent TLS private key',
    );
  }
  if (vault.problem !== null) check('vault_key.source', 'fail', vault.problem);
  else check('vault_key.source', 'ok', `the vault key comes from ${describeVaultSource(vault)}`);

  // ---------------------------------------------------------------- datastore
  const dbSecrets = cfg.database.kind === 'postgres' ? databaseUrlSecrets(cfg.database.url) : [];
  const dbName =
    cfg.database.kind === 'sqlite'
      ? `the SQLite database ${cfg.database.file}`
      : `PostgreSQL at ${redactDatabaseUrl(cfg.database.url)}`;
  let store: DoctorStore | null = null;
  if (sqliteFile !== null && !dataDirExists) {
    // Reported by data_dir.exists; the database lives there.
  } else if (sqliteFile !== null && !modes.get(sqliteFile)) {
    // Missing (or not inspectable): opening it would create an empty database.
    check(
      'datastore.reachable',
      'fail',
      `there is no database at ${sqliteFile}: run \`leoflow standalone\` with this configuration once (it creates and migrates it); doctor never creates one`,
    );
  } else {
    try {
      store = await deps.openStore(cfg.database);
      check('datastore.reachable', 'ok', `opened ${dbName}`);
    } catch (err) {
      check(
        'datastore.reachable',
        'fail',
        `cannot open ${dbName}: ${errorText(err)}. ` +
          (cfg.database.kind === 'postgres'
            ? 'Check that PostgreSQL is running and --database-url / LEOFLOW_DATABASE_URL is right.'
            : 'Check the file is a Leoflow database and readable by this user.'),
      );
    }
  }
  if (store !== null) {
    try {
      const { applied, pending } = await store.migrationStatus();
      if (pending.length === 0) {
        check(
          'datastore.migrations',
          'ok',
          `all ${applied.length} migrations applied (latest ${applied.at(-1) ?? 'none'})`,
        );
      } else {
        check(
          'datastore.migrations',
          'fail',
          `${pending.length} migration(s) pending (${pending.join(', ')}): start \`leoflow standalone\` with this configuration once, it migrates at start (doctor never migrates)`,
        );
      }
      if (pending.length === 0 && store.undeclaredUse !== undefined) {
        const dags = await store.undeclaredUse(cfg.tenantId);
        if (dags.length === 0) {
          check(
            'secrets.undeclared_use',
            'ok',
            'no task has read (through the SDK) a Variable or Connection its DAG did not declare',
          );
        } else {
          const list = dags
            .map(
              (d) =>
                `${d.dag_id} (${[
                  d.variables.length > 0 ? `variables ${d.variables.join(', ')}` : '',
                  d.connections.length > 0 ? `connections ${d.connections.join(', ')}` : '',
                ]
                  .filter((x) => x !== '')
                  .join('; ')})`,
            )
            .join(', ');
          check(
            'secrets.undeclared_use',
            'warn',
            `tasks read names their DAG did not declare — secret_scoping=enforce would withhold them: ${list}. Declare them in leoflow.yaml (variables:/connections:) before switching; details: GET /api/v1/secrets/undeclared-use`,
          );
        }
      }
    } catch (err) {
      check('datastore.migrations', 'fail', `cannot read the migration status: ${errorText(err)}`);
    }
    if (store.secureDelete !== undefined) {
      try {
        const v = await store.secureDelete();
        if (v === 1) {
          check(
            'datastore.secure_delete',
            'ok',
            'PRAGMA secure_delete is on: freed pages are zeroed, so an overwritten or deleted secret does not linger in the file',
          );
        } else {
          check(
            'datastore.secure_delete',
            'warn',
            `PRAGMA secure_delete is ${v === 2 ? 'fast' : 'off'}: an overwritten or deleted value can linger in the file's free pages; upgrade Leoflow (it turns it on for every connection), then \`sqlite3 ${sh(sqliteFile ?? '')} 'PRAGMA secure_delete=ON; VACUUM;'\` while standalone is stopped`,
          );
        }
      } catch (err) {
        check(
          'datastore.secure_delete',
          'warn',
          `cannot read PRAGMA secure_delete: ${errorText(err)}`,
        );
      }
    }
    await store.close().catch(() => undefined);
  }

  // ---------------------------------------------------------------- agent channel
  const agentAddress = `${cfg.agent.host}:${cfg.agent.port}`;
  const channel: AgentChannelMode =
    cfg.agent.tls !== null
      ? 'tls'
      : isLoopbackHost(cfg.agent.host)
        ? 'cleartext-loopback'
        : 'cleartext-non-loopback';
  if (channel === 'cleartext-non-loopback') {
    check(
      'agent.channel',
      'fail',
      `the agent RPC is cleartext on ${agentAddress}, a non-loopback address: the server refuses to deliver Variables and Connections over it; set --agent-tls-cert and --agent-tls-key, or bind it to 127.0.0.1`,
    );
  } else if (channel === 'tls') {
    check('agent.channel', 'ok', `the agent RPC on ${agentAddress} is TLS`);
  } else {
    check(
      'agent.channel',
      'ok',
      `the agent RPC is cleartext on loopback (${agentAddress}); only local processes can reach it`,
    );
    expose(
      'agent_channel.cleartext_loopback',
      'The agent RPC is cleartext HTTP/2 on loopback: any local process can connect to it, though every call needs a valid attempt token.',
      'Set --agent-tls-cert and --agent-tls-key to encrypt it as well.',
    );
  }
  if (cfg.agent.tls !== null) {
    const missing: string[] = [];
    for (const f of [cfg.agent.tls.certFile, cfg.agent.tls.caFile]) {
      if (f !== null && (await stat(f)).info === null) missing.push(f);
    }
    if (missing.length > 0)
      check(
        'agent.tls_files',
        'fail',
        `${missing.join(', ')} does not exist: fix --agent-tls-cert / --agent-tls-ca`,
      );
    else
      check(
        'agent.tls_files',
        'ok',
        `certificate ${cfg.agent.tls.certFile}${cfg.agent.tls.caFile ? `, CA ${cfg.agent.tls.caFile}` : ''} present`,
      );
  }

  // ---------------------------------------------------------------- tasks' user
  const runAs = await runAsPosture(cfg, deps);
  check('tasks.run_as', runAs.status, runAs.message);
  const isolation = await isolationPosture(cfg, deps, runAs, check);
  if (isolation.mode !== 'per-attempt' && runAs.status !== 'fail') {
    expose(
      'tasks.shared_uid',
      `Every attempt runs under the same uid${runAs.uid !== null ? ` (${runAs.uid})` : ''}: a task can read another running task's /proc/<pid>/environ (the Variables and Connections delivered to it), list its work dir through /proc/<pid>/cwd and signal it — across DAGs and tenants — and a child it detaches with setsid outlives its attempt.`,
      'Run Lite as root with execution.attempt_uid_range on (the default; --attempt-uid-range), so every attempt gets a uid of its own.',
    );
  }
  if (!runAs.isolated && runAs.status !== 'fail') {
    const ptrace = (await deps.readText(PTRACE_SCOPE_FILE))?.trim();
    const memory =
      ptrace === '0'
        ? ", and, since ptrace is allowed between one user's processes (ptrace_scope 0), the agent's memory and the attempt token in it"
        : ptrace === undefined
          ? ", and, where ptrace is allowed, the agent's memory and the attempt token in it"
          : '';
    expose(
      'tasks.same_user',
      `Tasks run as the control plane's user${runAs.uid !== null ? ` (uid ${runAs.uid})` : ''}, so task code can read the data dir — the vault keyring, the signing keys, the admin token and the database${memory}.`,
      'Run Lite as root with --run-as-user <an unprivileged account> (default nobody), or as a dedicated account that owns nothing else, when tasks are not fully trusted.',
    );
  }

  // ---------------------------------------------------------------- credential settings
  const cred = cfg.credentials;
  const ttl = formatDuration(agentTokenTtlSeconds(cfg.execution.heartbeatIntervalMs / 1000));
  if (cred.secretScoping === 'permissive') {
    expose(
      'secret_scoping.permissive',
      'Secret scoping is permissive: every task receives the whole tenant vault, including Variables and Connections it did not declare, with only a count-only secret.scope_warning in the audit log.',
      'Declare what each DAG needs (connections: / variables:) and run with --secret-scoping enforce.',
    );
  } else if (cred.secretScoping === 'off') {
    expose(
      'secret_scoping.off',
      'Secret scoping is off: every task receives the whole tenant vault and nothing records that it received more than it declared.',
      'Declare what each DAG needs and run with --secret-scoping enforce (or permissive to see the gaps first).',
    );
  }
  if (cred.secretLivenessMode === 'observe') {
    expose(
      'secret_liveness.observe',
      `Liveness is observe: an attempt that is no longer live (finished, failed, reaped or cleared) can still fetch secrets with its token until that token expires (up to ${ttl} after its last renewal), recorded only as secret.liveness_would_deny.`,
      'Run with --secret-liveness-mode enforce.',
    );
  }
  if (cred.maxAttemptCredentialLifetimeSeconds <= 0) {
    expose(
      'credential_lifetime.unbounded',
      "The credential renewal ceiling is disabled: a live attempt's token keeps being renewed for as long as the attempt heartbeats.",
      'Set --max-attempt-credential-lifetime (default 24h) to bound it.',
    );
  }

  // ---------------------------------------------------------------- where keys sit
  if (sqliteFile !== null) {
    const keyFile = vault.file;
    const keyInfo =
      keyFile === null
        ? null
        : modes.has(keyFile)
          ? modes.get(keyFile)
          : (await stat(keyFile)).info;
    const dbInfo = modes.get(sqliteFile) ?? null;
    if (keyFile !== null && (vault.source === 'lite-keyring-file' || isInside(keyFile, dataDir))) {
      expose(
        'vault_key.beside_database',
        `The vault key (${keyFile}) sits in the same data dir as the SQLite database it protects: whoever copies the data dir — a backup, a disk image — gets both the ciphertexts and the key that opens them.`,
        'Back the keyring up apart from the database, or supply the key from elsewhere: LEOFLOW_SECRET_KEY from a secret manager, or LEOFLOW_SECRET_KEYRING_FILE on another volume.',
      );
    } else if (keyFile !== null && keyInfo && dbInfo && keyInfo.dev === dbInfo.dev) {
      expose(
        'vault_key.beside_database',
        `The vault keyring ${keyFile} is on the same filesystem as the SQLite database: a disk image or snapshot holds both the ciphertexts and the key that opens them.`,
        'Keep the keyring on another volume (or supply LEOFLOW_SECRET_KEY from a secret manager).',
      );
    }
    if (vault.olderKeysFile !== null && modes.get(vault.olderKeysFile)) {
      expose(
        'vault_key.older_keys_beside_database',
        `Lite's generated keyring ${vault.olderKeysFile} is still loaded for older keys and sits beside the database: values sealed under it open with what is on the disk alone.`,
        'Re-encrypt every value under the current key, then move that file off this disk.',
      );
    }
  }
  if (vault.source === 'env') {
    expose(
      'vault_key.in_environment',
      `The vault key is in the control plane's environment (${SECRET_KEY_ENV}): processes of the same user, and root, can read it from /proc/<pid>/environ (agents and tasks start with a minimal environment without it).`,
      `Prefer ${SECRET_KEYRING_FILE_ENV} pointing at a mode 0600 file, and run tasks as another user (--run-as-user).`,
    );
  }

  // ---------------------------------------------------------------- admin token
  const adminInfo = modes.get(files.admin) ?? null;
  const adminExpires = adminInfo !== null ? await tokenHasExpiry(deps, files.admin) : null;
  if (adminExpires !== true) {
    expose(
      'admin_token.no_expiry',
      `The admin token ${adminInfo !== null ? 'in' : 'standalone writes to'} ${files.admin} has no expiry: whoever copies it keeps platform-admin access until it is revoked.`,
      `Keep it mode 0600 and out of shared backups; mint named tokens with a TTL for people and scripts (\`leoflow auth create-token --role admin --ttl 12h\`) and revoke this one with \`leoflow auth revoke-token admin\` (delete ${files.admin} and restart to get a fresh one).`,
    );
  }

  // ---------------------------------------------------------------- listeners
  if (!isLoopbackHost(cfg.http.host)) {
    expose(
      'http.cleartext_non_loopback',
      `The REST API listens on ${cfg.http.host}:${cfg.http.port} over cleartext HTTP: API tokens (the admin token among them) and revealed secrets cross the network unencrypted.`,
      'Bind it to 127.0.0.1 (--host) and put a TLS-terminating proxy in front of it.',
    );
  }
  if (cfg.metrics.port !== null && !isLoopbackHost(cfg.metrics.host)) {
    expose(
      'metrics.non_loopback',
      `The metrics listener on ${cfg.metrics.host}:${cfg.metrics.port} answers anyone who can reach it, without authentication (counts only: no tenant, DAG, task or secret names).`,
      'Bind it to 127.0.0.1, or firewall the port to your Prometheus.',
    );
  }
  if (cfg.database.kind === 'postgres' && databaseUrlHasPassword(cfg.database.url)) {
    if (opts.databaseUrlSource === 'flag') {
      expose(
        'database_url.password_on_command_line',
        "The database password is on the control plane's command line (--database-url): every local user can read it in the process list.",
        'Pass the URL in LEOFLOW_DATABASE_URL instead, or leave the password out of it and use ~/.pgpass (mode 0600) or certificate authentication.',
      );
    } else {
      expose(
        'database_url.password_in_environment',
        "The database password is in the control plane's environment (LEOFLOW_DATABASE_URL): processes of the same user, and root, can read it from /proc/<pid>/environ.",
        'Leave the password out of the URL and use ~/.pgpass (mode 0600) or certificate authentication.',
      );
    }
  }

  if (cfg.dagsFolder !== null) {
    const d = await stat(cfg.dagsFolder);
    if (d.info?.kind === 'directory') check('dags_folder.exists', 'ok', `${cfg.dagsFolder} exists`);
    else
      check(
        'dags_folder.exists',
        'warn',
        `${cfg.dagsFolder} is not a directory: no DAG will load from it; fix --dags-folder / LEOFLOW_DAGS_FOLDER`,
      );
  }

  const mode = (p: string | null): string | null => {
    if (p === null) return null;
    const i = modes.get(p);
    return i ? octal(i.mode) : null;
  };
  const posture: Posture = {
    secret_scoping: cred.secretScoping,
    secret_liveness_mode: cred.secretLivenessMode,
    attempt_token_ttl: ttl,
    max_attempt_credential_lifetime:
      cred.maxAttemptCredentialLifetimeSeconds > 0
        ? formatDuration(cred.maxAttemptCredentialLifetimeSeconds)
        : 'disabled',
    token_transport: {
      subprocess: SUBPROCESS_TOKEN_TRANSPORT,
      kubernetes: KUBERNETES_TOKEN_TRANSPORT,
      configured: cred.agentTokenTransport,
      warm_pools: cred.warmPoolsEnabled
        ? 'enabled in config; not available in this build'
        : 'disabled',
    },
    key_storage: {
      vault: {
        source: vault.source,
        file: vault.file,
        mode: mode(vault.file),
        env_var: vault.source === 'env' ? SECRET_KEY_ENV : null,
        older_keys_file:
          vault.olderKeysFile !== null && modes.get(vault.olderKeysFile)
            ? vault.olderKeysFile
            : null,
      },
      agent_signing: { file: files.agent, mode: mode(files.agent) },
      user_signing: { file: files.user, mode: mode(files.user) },
      admin_token: { file: files.admin, mode: mode(files.admin), expires: adminExpires },
    },
    agent_channel: {
      mode: channel,
      address: agentAddress,
      secrets_delivered: channel !== 'cleartext-non-loopback',
    },
    tasks_run_as: {
      isolated: runAs.isolated,
      user: runAs.user,
      uid: runAs.uid,
      summary: runAs.summary,
    },
    isolation,
    exposures,
  };

  exposures.sort((a, b) => exposureRank(a.id) - exposureRank(b.id));
  // Defence in depth: nothing a driver or a path said may carry the database password out.
  const clean = (s: string) => scrub(s, dbSecrets);
  const cleanChecks = checks.map((c) => ({ ...c, message: clean(c.message) }));
  for (const e of exposures) {
    e.sentence = clean(e.sentence);
    e.remedy = clean(e.remedy);
  }
  return {
    edition: 'lite',
    config: redactedConfig(cfg),
    posture,
    checks: cleanChecks,
    summary: {
      ok: cleanChecks.filter((c) => c.status === 'ok').length,
      warn: cleanChecks.filter((c) => c.status === 'warn').length,
      fail: cleanChecks.filter((c) => c.status === 'fail').length,
    },
  };
}

/** The effective configuration with nothing secret in it (an allow-list, not a copy). */
export function redactedConfig(cfg: ServerConfig): RedactedConfig {
  const c = cfg.credentials;
  const ms = (v: number) => formatDuration(v / 1000);
  return {
    data_dir: cfg.dataDir,
    tenant_id: cfg.tenantId,
    database:
      cfg.database.kind === 'sqlite'
        ? { kind: 'sqlite', file: cfg.database.file }
        : {
            kind: 'postgres',
            url: redactDatabaseUrl(cfg.database.url),
            ...(cfg.database.schema !== undefined ? { schema: cfg.database.schema } : {}),
          },
    http: { host: cfg.http.host, port: cfg.http.port },
    agent: {
      host: cfg.agent.host,
      port: cfg.agent.port,
      advertise_url: cfg.agent.advertiseUrl,
      tls: cfg.agent.tls
        ? {
            cert_file: cfg.agent.tls.certFile,
            key_file: cfg.agent.tls.keyFile,
            ca_file: cfg.agent.tls.caFile,
          }
        : null,
    },
    metrics: { host: cfg.metrics.host, port: cfg.metrics.port },
    dags_folder: cfg.dagsFolder,
    vault_seed_dir: cfg.vaultSeedDir,
    log_level: cfg.logLevel,
    credentials: {
      'auth.secret_scoping': c.secretScoping,
      'auth.secret_liveness_mode': c.secretLivenessMode,
      'auth.max_attempt_credential_lifetime': formatDuration(c.maxAttemptCredentialLifetimeSeconds),
      'auth.agent_token_transport': c.agentTokenTransport,
      'execution.warm_pools_enabled': c.warmPoolsEnabled,
    },
    execution: {
      heartbeat_interval: ms(cfg.execution.heartbeatIntervalMs),
      agent_lost_threshold: ms(cfg.execution.agentLostThresholdMs),
      dispatch_lost_threshold: ms(cfg.execution.dispatchLostThresholdMs),
      attempt_uid_range: cfg.execution.attemptUidRange,
      attempt_nproc_limit: cfg.execution.attemptNprocLimit,
      run_as_user: cfg.execution.runAsUser,
      standby_agents: cfg.execution.standbyAgents,
      work_dir: cfg.execution.workDir,
    },
  };
}

// ------------------------------------------------------------------ internals

/** Exposures read in this order: what tasks receive, who can read keys, then the network. */
const EXPOSURE_ORDER = [
  'secret_scoping.',
  'secret_liveness.',
  'credential_lifetime.',
  'tasks.',
  'vault_key.',
  'admin_token.',
  'database_url.',
  'agent_channel.',
  'http.',
  'metrics.',
];

function exposureRank(id: string): number {
  const i = EXPOSURE_ORDER.findIndex((prefix) => id.startsWith(prefix));
  return i === -1 ? EXPOSURE_ORDER.length : i;
}

interface VaultKeySource {
  source: KeyringSource;
  file: string | null;
  olderKeysFile: string | null;
  /** why standalone would refuse to load the key, when it would */
  problem: string | null;
}

/** Mirrors loadKeyring's resolution for Lite without reading any key file. */
function vaultKeySource(env: DoctorDeps['env'], dataDir: string): VaultKeySource {
  const envKey = env[SECRET_KEY_ENV];
  const previous = env[SECRET_KEY_PREVIOUS_ENV];
  const fileSetting = env[SECRET_KEYRING_FILE_ENV];
  const file = fileSetting === undefined || fileSetting === '' ? null : fileSetting;
  const lite = liteKeyringPath(dataDir);
  let problem: string | null = null;
  if (envKey !== undefined && file !== null) {
    problem = `both ${SECRET_KEY_ENV} and ${SECRET_KEYRING_FILE_ENV} are set: standalone refuses to start; unset one (a keyring file already holds the current key and any older ones)`;
  } else if (previous !== undefined && envKey === undefined) {
    problem = `${SECRET_KEY_PREVIOUS_ENV} is set without ${SECRET_KEY_ENV}: standalone refuses to start; set the current key too, or put every key in a keyring file`;
  } else if (envKey !== undefined) {
    // Validated, never shown: the parser's message names the setting and the length only.
    try {
      parseSecretKey(envKey, SECRET_KEY_ENV);
      (previous ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '')
        .forEach((s, i) => parseSecretKey(s, `${SECRET_KEY_PREVIOUS_ENV} (entry ${i + 1})`));
    } catch (err) {
      problem = `${errorText(err)} Standalone refuses to start with it.`;
    }
  }
  if (envKey !== undefined) return { source: 'env', file: null, olderKeysFile: lite, problem };
  if (file !== null) {
    return { source: 'keyring-file', file, olderKeysFile: file === lite ? null : lite, problem };
  }
  return { source: 'lite-keyring-file', file: lite, olderKeysFile: null, problem };
}

function describeVaultSource(v: VaultKeySource): string {
  switch (v.source) {
    case 'env':
      return `the environment (${SECRET_KEY_ENV})`;
    case 'keyring-file':
      return `the keyring file ${v.file ?? ''} (${SECRET_KEYRING_FILE_ENV})`;
    case 'lite-keyring-file':
      return `Lite's generated keyring file ${v.file ?? ''}`;
  }
}

interface RunAsPosture {
  isolated: boolean;
  user: string | null;
  uid: number | null;
  summary: string;
  status: CheckStatus;
  message: string;
}

/** Mirrors resolveRunAs (executor/run-as-user.ts) with the uid and passwd file injected. */
async function runAsPosture(cfg: ServerConfig, deps: DoctorDeps): Promise<RunAsPosture> {
  const user = cfg.execution.runAsUser;
  const self = deps.uid;
  const notIsolated = (summary: string, message: string): RunAsPosture => ({
    isolated: false,
    user: null,
    uid: self,
    summary,
    status: 'warn',
    message,
  });
  if (self === null) {
    return notIsolated(
      "this control plane's user: task code can read the data dir",
      "this platform has no user ids to drop to: tasks run as the control plane's user and can read the data dir",
    );
  }
  if (self !== 0) {
    return notIsolated(
      `this control plane's user (uid ${self}): task code can read the data dir`,
      `not running as root, so tasks run as uid ${self} too and can read the data dir; run Lite as root with --run-as-user <unprivileged user>, or as a dedicated account`,
    );
  }
  if (cfg.execution.attemptUidRange !== null) {
    return {
      isolated: true,
      user: null,
      uid: null,
      summary: `a uid of its own per attempt, from ${cfg.execution.attemptUidRange} (no supplementary groups), outside the 0700 data dir`,
      status: 'ok',
      message: `every attempt runs under its own uid and gid from ${ATTEMPT_UID_RANGE_KEY} ${cfg.execution.attemptUidRange}, without supplementary groups, in a 0700 work dir it owns; when it ends every process of that uid is killed before the uid is reused`,
    };
  }
  if (user === null) {
    return notIsolated(
      'root (--run-as-user none): task code can read the data dir',
      'running as root with --run-as-user none: tasks run as root; set --run-as-user to an unprivileged account (default nobody)',
    );
  }
  const resolved = lookupUser(user, await deps.readText(PASSWD_FILE));
  if (resolved === null) {
    return {
      isolated: false,
      user,
      uid: null,
      summary: `${user} (not an account on this machine)`,
      status: 'fail',
      message: `execution.run_as_user names "${user}", which is not an account on this machine: standalone refuses to start; create it (useradd --system ${user}) or set --run-as-user to an existing unprivileged user`,
    };
  }
  if (resolved.uid === 0) {
    return {
      isolated: false,
      user,
      uid: 0,
      summary: `${user} (uid 0): task code can read the data dir`,
      status: 'warn',
      message: `--run-as-user ${user} is uid 0: tasks run as root; set it to an unprivileged account (default nobody)`,
    };
  }
  return {
    isolated: true,
    user,
    uid: resolved.uid,
    summary: `${user} (uid ${resolved.uid}), outside the 0700 data dir`,
    status: 'ok',
    message: `tasks run as ${user} (uid ${resolved.uid}, gid ${resolved.gid}) in per-attempt work dirs; the data dir (mode 0700) is closed to them`,
  };
}

/**
 * Per-attempt uids, RLIMIT_NPROC, cgroup limits, the work root and the SDK copy node tasks
 * import: what is enforced on this machine, each as a check, and the posture summary.
 */
async function isolationPosture(
  cfg: ServerConfig,
  deps: DoctorDeps,
  runAs: RunAsPosture,
  check: (id: string, status: CheckStatus, message: string) => void,
): Promise<IsolationPosture> {
  const ex = cfg.execution;
  const perAttempt = deps.uid === 0 && ex.attemptUidRange !== null;
  const mode: IsolationPosture['mode'] = perAttempt
    ? 'per-attempt'
    : runAs.isolated
      ? 'shared'
      : 'none';
  let nproc: IsolationPosture['nproc_limit'] = {
    limit: 0,
    enforced: false,
    detail:
      'not applied: attempts share a uid, so a per-uid process limit would bound them all together',
  };
  let cgroup: IsolationPosture['cgroup_limits'] = {
    enforced: false,
    detail: 'not enforced: attempts have no cgroup of their own',
  };
  if (perAttempt && ex.attemptUidRange !== null) {
    try {
      const range = parseUidRange(ex.attemptUidRange);
      const read = (f: string) => deps.readText(f);
      const hits = uidRangeCollisions(range, {
        passwd: await read('/etc/passwd'),
        group: await read('/etc/group'),
        subuid: await read('/etc/subuid'),
        subgid: await read('/etc/subgid'),
      });
      if (hits.length > 0)
        check(
          'tasks.attempt_uid_range',
          'fail',
          `${uidRangeCollisionMessage(range, hits)}; standalone refuses to start`,
        );
      else
        check(
          'tasks.attempt_uid_range',
          'ok',
          `${ATTEMPT_UID_RANGE_KEY} ${ex.attemptUidRange} (${range.last - range.first + 1} uids) holds no account, group or subordinate id range of /etc/passwd, /etc/group, /etc/subuid, /etc/subgid`,
        );
    } catch (err) {
      check('tasks.attempt_uid_range', 'fail', isLeoflowError(err) ? err.message : errorText(err));
    }
    const prlimit = await findExecutable(deps, 'prlimit');
    if (ex.attemptNprocLimit <= 0) {
      nproc = {
        limit: 0,
        enforced: false,
        detail: 'not applied (execution.attempt_nproc_limit is 0)',
      };
      check(
        'tasks.nproc_limit',
        'warn',
        'execution.attempt_nproc_limit is 0: a task can fork without bound; set --attempt-nproc-limit (default 4096)',
      );
    } else if (prlimit === null) {
      nproc = {
        limit: ex.attemptNprocLimit,
        enforced: false,
        detail: 'not applied: prlimit (util-linux) is not on PATH',
      };
      check(
        'tasks.nproc_limit',
        'warn',
        `prlimit (util-linux) is not on PATH, so RLIMIT_NPROC ${ex.attemptNprocLimit} is not applied to attempts (Node cannot set rlimits itself); install util-linux`,
      );
    } else {
      nproc = {
        limit: ex.attemptNprocLimit,
        enforced: true,
        detail: `RLIMIT_NPROC ${ex.attemptNprocLimit} per attempt uid, set by ${prlimit}`,
      };
      check(
        'tasks.nproc_limit',
        'ok',
        `each attempt's uid is limited to ${ex.attemptNprocLimit} processes and threads (RLIMIT_NPROC via ${prlimit})`,
      );
    }
    const v2 = await cgroupV2Delegation(deps);
    cgroup = {
      enforced: false,
      detail: v2.delegated
        ? `not enforced: cgroup v2 delegates memory and pids at ${v2.where}, but this build does not place attempts in cgroups`
        : `not enforced: ${v2.why}`,
    };
    check(
      'tasks.cgroup_limits',
      'warn',
      `attempt memory and pids are not bounded by a cgroup: ${cgroup.detail.replace(/^not enforced: /, '')}; RLIMIT_NPROC is the only per-attempt limit`,
    );
  }

  // work root and the SDK copy in it
  let workRoot = ex.workDir;
  if (workRoot === null) {
    const id = (await deps.readText(join(cfg.dataDir, INSTALL_ID_FILE)))?.trim();
    workRoot = id && /^[0-9a-f]{16}$/.test(id) ? workRootFor(id) : null;
  }
  let sdk: IsolationPosture['task_sdk'] = { file: null, readable: null };
  if (workRoot === null) {
    check(
      'work_root.owner',
      'warn',
      `no install id in ${join(cfg.dataDir, INSTALL_ID_FILE)} yet: standalone creates it and the work root /tmp/leoflow-work-<install id> on first start`,
    );
  } else {
    const root = await safeStat(deps)(workRoot);
    if (root.info === null) {
      check(
        'work_root.owner',
        'warn',
        `${workRoot} does not exist yet: standalone creates it (mode 0711) at start`,
      );
    } else if (
      root.info.kind !== 'directory' ||
      (deps.uid !== null && root.info.uid !== deps.uid)
    ) {
      check(
        'work_root.owner',
        'fail',
        `${workRoot} is not a directory owned by uid ${deps.uid ?? '?'}: standalone refuses to start; remove it`,
      );
    } else if ((root.info.mode & 0o022) !== 0) {
      check(
        'work_root.owner',
        'fail',
        `${workRoot} is mode ${octal(root.info.mode)}: others may write there; run \`chmod 711 ${sh(workRoot)}\``,
      );
    } else {
      check(
        'work_root.owner',
        'ok',
        `${workRoot} (this installation's work root) is mode ${octal(root.info.mode)}, owned by uid ${root.info.uid}`,
      );
    }
    if (root.info !== null) {
      const file = join(workRoot, SDK_ENTRY);
      const readable = await readableByOthers(deps, file);
      sdk = { file, readable };
      if (readable === null)
        check(
          'tasks.sdk_reachable',
          'warn',
          `${file} does not exist: node tasks cannot \`import '@leoflow/sdk'\`; run \`npm run build\` and restart standalone (it copies the SDK bundle there)`,
        );
      else if (!readable)
        check(
          'tasks.sdk_reachable',
          'fail',
          `${file} or a directory above it is closed to other users: node tasks, running under unprivileged uids, cannot import @leoflow/sdk; restart standalone (it recreates it 0755/0644)`,
        );
      else
        check(
          'tasks.sdk_reachable',
          'ok',
          `node tasks import @leoflow/sdk from ${file}, readable by an unprivileged uid`,
        );
    }
  }
  return {
    mode,
    attempt_uid_range: perAttempt ? ex.attemptUidRange : null,
    nproc_limit: nproc,
    cgroup_limits: cgroup,
    work_root: workRoot,
    task_sdk: sdk,
  };
}

/** Others' bits only: a per-attempt uid owns nothing and is in no group. null: no such file. */
async function readableByOthers(deps: DoctorDeps, file: string): Promise<boolean | null> {
  const st = await safeStat(deps)(file);
  if (st.info === null) return null;
  if ((st.info.mode & 0o004) === 0) return false;
  let dir = dirname(file);
  for (;;) {
    const d = await safeStat(deps)(dir);
    if (d.info === null || (d.info.mode & 0o001) === 0) return false;
    const up = dirname(dir);
    if (up === dir) return true;
    dir = up;
  }
}

async function findExecutable(deps: DoctorDeps, name: string): Promise<string | null> {
  const dirs = [...(deps.env['PATH'] ?? '').split(':'), '/usr/bin', '/bin'];
  for (const d of dirs) {
    if (!d) continue;
    const p = join(d, name);
    const st = await safeStat(deps)(p);
    if (st.info?.kind === 'file' && (st.info.mode & 0o111) !== 0) return p;
  }
  return null;
}

/** Whether this process's cgroup v2 node offers memory and pids to a subtree it could create. */
async function cgroupV2Delegation(
  deps: DoctorDeps,
): Promise<{ delegated: true; where: string } | { delegated: false; why: string }> {
  const self = await deps.readText('/proc/self/cgroup');
  const mountinfo = await deps.readText('/proc/self/mountinfo');
  const path = /^0::(.*)$/m.exec(self ?? '')?.[1];
  const mount = (mountinfo ?? '')
    .split('\n')
    .map((l) => l.split(' '))
    .find((f) => f[f.indexOf('-') + 1] === 'cgroup2')?.[4];
  if (path === undefined || mount === undefined)
    return { delegated: false, why: 'cgroup v2 is not mounted for this process' };
  const node = join(mount, path);
  const controllers = (await deps.readText(join(node, 'cgroup.controllers')))?.split(/\s+/) ?? [];
  if (!controllers.includes('memory') || !controllers.includes('pids'))
    return {
      delegated: false,
      why: `cgroup v2 at ${node} offers no memory and pids controllers: they are on cgroup v1 here, or not delegated to this service`,
    };
  return { delegated: true, where: node };
}

function lookupUser(user: string, passwd: string | null): { uid: number; gid: number } | null {
  const numeric = /^(\d+)(?::(\d+))?$/.exec(user);
  if (numeric) {
    const uid = Number(numeric[1]);
    return { uid, gid: numeric[2] === undefined ? uid : Number(numeric[2]) };
  }
  for (const line of (passwd ?? '').split('\n')) {
    const f = line.split(':');
    if (f[0] === user && f[2] !== undefined && f[3] !== undefined) {
      return { uid: Number(f[2]), gid: Number(f[3]) };
    }
  }
  return null;
}

/**
 * Whether the admin token carries an `exp` claim: only the claims segment is decoded, the
 * token itself never leaves this function. null when it cannot be told.
 */
async function tokenHasExpiry(deps: DoctorDeps, file: string): Promise<boolean | null> {
  const text = await deps.readText(file);
  const payload = text?.trim().split('.')[1];
  if (payload === undefined) return null;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown;
    if (typeof claims !== 'object' || claims === null) return null;
    return typeof (claims as { exp?: unknown }).exp === 'number';
  } catch {
    return null;
  }
}

function ownerCheck(
  id: string,
  path: string,
  info: FileInfo,
  uid: number | null,
  check: (id: string, status: CheckStatus, message: string) => void,
): void {
  if (uid === null) return;
  if (info.uid !== uid) {
    check(
      id,
      'fail',
      `${path} is owned by uid ${info.uid}, not by the user running doctor (uid ${uid}): run doctor as the user that runs standalone, or \`chown -R ${uid} ${sh(path)}\``,
    );
  } else {
    check(id, 'ok', `${path} is owned by uid ${uid} (the user running doctor)`);
  }
}

function safeStat(
  deps: DoctorDeps,
): (path: string) => Promise<{ info: FileInfo | null; error?: string }> {
  return async (path) => {
    try {
      return { info: await deps.stat(path) };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      return { info: null, error: code ?? errorText(err) };
    }
  };
}

function isInside(file: string, dir: string): boolean {
  const d = dir.endsWith('/') ? dir : `${dir}/`;
  return file.startsWith(d);
}

function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

/** A path as a shell word, quoted only when it needs to be. */
function sh(path: string): string {
  return /^[\w./@:+,=-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`;
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message !== '' ? err.message : err.name;
  return String(err);
}
