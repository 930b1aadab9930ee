import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { ServerConfig } from '@leoflow/server';
import { CliError } from '../client.js';
import { parseDurationMs } from '../duration.js';

/** The flags `leoflow standalone` and `leoflow doctor` share (see addStandaloneOptions). */
export interface StandaloneFlags {
  dataDir?: string;
  httpPort?: string;
  agentPort?: string;
  dagsFolder?: string;
  host?: string;
  databaseUrl?: string;
  heartbeatInterval?: string;
  agentLostThreshold?: string;
  dispatchLostThreshold?: string;
  runAsUser?: string;
  attemptUidRange?: string;
  attemptNprocLimit?: string;
  logLevel?: string;
  agentTlsCert?: string;
  agentTlsKey?: string;
  agentTlsCa?: string;
  secretScoping?: string;
  secretLivenessMode?: string;
  maxAttemptCredentialLifetime?: string;
  metricsPort?: string;
  vaultSeed?: string;
  config?: string;
  standbyAgents?: string;
  logMaxLineBytes?: string;
  logMaxBytesPerAttempt?: string;
  logWriteGrace?: string;
  doorPort?: string;
  doorHost?: string;
  doorUrl?: string;
  cellPort?: string;
  cellName?: string;
  doorKeysFile?: string;
  directorySchema?: string;
  databaseSchema?: string;
}

/** defaults < env (LEOFLOW_…) < flags */
export async function standaloneConfig(
  flags: StandaloneFlags,
  env = process.env,
): Promise<ServerConfig> {
  // Loaded on demand: client commands should not pay for the whole control plane at start-up.
  const { defaultServerConfig } = await import('@leoflow/server');
  const dataDir = flags.dataDir ?? env.LEOFLOW_DATA_DIR ?? '.leoflow';
  const cfg = defaultServerConfig(dataDir);
  const pick = (flag: string | undefined, envName: string) => flag ?? env[envName];
  const port = (v: string | undefined, setting: string, fallback: number) => {
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0 || n > 65535) {
      throw new CliError(
        `${setting} must be a port number 0-65535 (got "${v}")`,
        2,
        'LF_CONFIG_INVALID',
      );
    }
    return n;
  };
  cfg.http.port = port(
    pick(flags.httpPort, 'LEOFLOW_HTTP_PORT'),
    '--http-port / LEOFLOW_HTTP_PORT',
    cfg.http.port,
  );
  cfg.agent.port = port(
    pick(flags.agentPort, 'LEOFLOW_AGENT_PORT'),
    '--agent-port / LEOFLOW_AGENT_PORT',
    cfg.agent.port,
  );
  const host = pick(flags.host, 'LEOFLOW_HTTP_HOST');
  if (host) cfg.http.host = host;
  const dags = pick(flags.dagsFolder, 'LEOFLOW_DAGS_FOLDER');
  cfg.dagsFolder = dags ? resolve(dags) : null;
  const db = pick(flags.databaseUrl, 'LEOFLOW_DATABASE_URL');
  if (db) {
    if (!/^postgres(ql)?:\/\//.test(db)) {
      throw new CliError(
        '--database-url must be a postgres:// URL (Lite uses SQLite when it is unset)',
        2,
        'LF_CONFIG_INVALID',
      );
    }
    cfg.database = { kind: 'postgres', url: db };
  }
  const dbSchema = pick(flags.databaseSchema, 'LEOFLOW_DATABASE_SCHEMA');
  if (dbSchema !== undefined) {
    if (cfg.database.kind !== 'postgres') {
      throw new CliError(
        '--database-schema needs --database-url (a PostgreSQL store); Lite keeps everything in its SQLite file',
        2,
        'LF_CONFIG_INVALID',
      );
    }
    cfg.database.schema = dbSchema;
  }
  const dur = (v: string | undefined, setting: string, fallback: number) =>
    v === undefined ? fallback : parseDurationMs(v, setting);
  const ex = cfg.execution;
  const sub = cfg.subprocess;
  ex.dispatchLostThresholdMs = dur(
    pick(flags.dispatchLostThreshold, 'LEOFLOW_EXECUTION_DISPATCH_LOST_THRESHOLD'),
    'execution.dispatch_lost_threshold',
    ex.dispatchLostThresholdMs,
  );
  const runAs = pick(flags.runAsUser, 'LEOFLOW_EXECUTION_RUN_AS_USER');
  if (runAs !== undefined) sub.runAsUser = runAs === '' || runAs === 'none' ? null : runAs;
  const range = pick(flags.attemptUidRange, 'LEOFLOW_EXECUTION_ATTEMPT_UID_RANGE');
  const nproc = pick(flags.attemptNprocLimit, 'LEOFLOW_EXECUTION_ATTEMPT_NPROC_LIMIT');
  {
    const { parseUidRange, parseNprocLimit, isLeoflowError } = await import('@leoflow/core');
    try {
      if (range !== undefined) {
        sub.attemptUidRange = range === 'off' ? null : range.trim();
        if (sub.attemptUidRange !== null) parseUidRange(sub.attemptUidRange);
      }
      if (nproc !== undefined) sub.attemptNprocLimit = parseNprocLimit(nproc);
    } catch (err) {
      if (isLeoflowError(err)) throw new CliError(err.message, 2, err.code);
      throw err;
    }
  }
  const cert = pick(flags.agentTlsCert, 'LEOFLOW_AGENT_TLS_CERT');
  const key = pick(flags.agentTlsKey, 'LEOFLOW_AGENT_TLS_KEY');
  if ((cert === undefined) !== (key === undefined)) {
    throw new CliError(
      'agent TLS needs both --agent-tls-cert and --agent-tls-key (LEOFLOW_AGENT_TLS_CERT / LEOFLOW_AGENT_TLS_KEY)',
      2,
      'LF_CONFIG_INVALID',
    );
  }
  if (cert !== undefined && key !== undefined) {
    const ca = pick(flags.agentTlsCa, 'LEOFLOW_AGENT_TLS_CA');
    cfg.agent.tls = {
      certFile: resolve(cert),
      keyFile: resolve(key),
      caFile: ca ? resolve(ca) : null,
    };
  }
  const doorPort = pick(flags.doorPort, 'LEOFLOW_DOOR_PORT');
  if (doorPort !== undefined) cfg.door.port = port(doorPort, '--door-port / LEOFLOW_DOOR_PORT', 0);
  const doorHost = pick(flags.doorHost, 'LEOFLOW_DOOR_HOST');
  if (doorHost) cfg.door.host = doorHost;
  const doorUrl = pick(flags.doorUrl, 'LEOFLOW_DOOR_URL');
  if (doorUrl !== undefined) {
    if (!/^https?:\/\/[^/]+\/?$/.test(doorUrl)) {
      throw new CliError(
        `--door-url must be the door's public base URL, e.g. https://door.example.com (got "${doorUrl}")`,
        2,
        'LF_CONFIG_INVALID',
      );
    }
    cfg.door.publicUrl = doorUrl.replace(/\/$/, '');
  }
  const cellPort = pick(flags.cellPort, 'LEOFLOW_CELL_PORT');
  if (cellPort !== undefined)
    cfg.door.cellPort = port(cellPort, '--cell-port / LEOFLOW_CELL_PORT', 0);
  const cellName = pick(flags.cellName, 'LEOFLOW_CELL_NAME');
  if (cellName) cfg.door.cellName = cellName;
  const doorKeys = pick(flags.doorKeysFile, 'LEOFLOW_DOOR_KEYS_FILE');
  if (doorKeys !== undefined) cfg.door.trustedKeysFile = resolve(doorKeys);
  const dirSchema = pick(flags.directorySchema, 'LEOFLOW_DIRECTORY_SCHEMA');
  if (dirSchema) cfg.directory.schema = dirSchema;
  if (
    cfg.database.kind === 'postgres' &&
    (cfg.database.schema ?? 'public') === cfg.directory.schema
  ) {
    // the directory is read by doors before any cell is contacted; it never shares a cell's schema
    throw new CliError(
      `--database-schema and --directory-schema are both "${cfg.directory.schema}": give the cell's store a schema of its own`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  cfg.metrics.port = port(
    pick(flags.metricsPort, 'LEOFLOW_METRICS_PORT'),
    '--metrics-port / LEOFLOW_METRICS_PORT',
    cfg.metrics.port ?? 0,
  );
  const standby = pick(flags.standbyAgents, 'LEOFLOW_EXECUTION_STANDBY_AGENTS');
  if (standby !== undefined) {
    const n = Number(standby);
    if (!Number.isInteger(n) || n < 0 || n > 64) {
      throw new CliError(
        `--standby-agents must be a whole number 0-64 (got "${standby}")`,
        2,
        'LF_CONFIG_INVALID',
      );
    }
    sub.standbyAgents = n;
  }
  const bytes = (v: string | undefined, setting: string, fallback: number): number => {
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < 1) {
      throw new CliError(
        `${setting} must be a positive whole number of bytes (got "${v}")`,
        2,
        'LF_CONFIG_INVALID',
      );
    }
    return n;
  };
  cfg.logs.maxLineBytes = bytes(
    pick(flags.logMaxLineBytes, 'LEOFLOW_LOGS_MAX_LINE_BYTES'),
    '--log-max-line-bytes / LEOFLOW_LOGS_MAX_LINE_BYTES',
    cfg.logs.maxLineBytes,
  );
  cfg.logs.maxBytesPerAttempt = bytes(
    pick(flags.logMaxBytesPerAttempt, 'LEOFLOW_LOGS_MAX_BYTES_PER_ATTEMPT'),
    '--log-max-bytes-per-attempt / LEOFLOW_LOGS_MAX_BYTES_PER_ATTEMPT',
    cfg.logs.maxBytesPerAttempt,
  );
  cfg.logs.writeGraceMs = dur(
    pick(flags.logWriteGrace, 'LEOFLOW_LOGS_WRITE_GRACE'),
    'logs.write_grace',
    cfg.logs.writeGraceMs,
  );
  if (cfg.logs.writeGraceMs <= 0) {
    throw new CliError(
      `logs.write_grace must be a positive duration such as 5m`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  const seed = pick(flags.vaultSeed, 'LEOFLOW_VAULT_SEED');
  if (seed) cfg.vaultSeedDir = resolve(seed);
  const level = pick(flags.logLevel, 'LEOFLOW_LOG_LEVEL');
  if (level) cfg.logLevel = level;

  // The credential plane's keys (and the timing ladder they are checked against) resolve in
  // core: defaults < env < flags, every problem named by key, boot refused on any.
  const { loadCredentialPlaneConfig, isLeoflowError } = await import('@leoflow/core');
  try {
    const configFile = pick(flags.config, 'LEOFLOW_CONFIG_FILE');
    const fileSettings = configFile ? await readConfigFile(configFile) : undefined;
    // The executor section is the server's (executor-config.ts); the rest is core's.
    const { executor: executorSection, ...credentialSettings } = fileSettings ?? {};
    const { parseExecutorSection } = await import('@leoflow/server');
    const executors = parseExecutorSection(executorSection, configFile ?? null);
    cfg.kubernetes = executors.kubernetes;
    if (executors.defaultExecutor) cfg.defaultExecutor = executors.defaultExecutor;
    const { config } = loadCredentialPlaneConfig({
      ...(fileSettings ? { file: credentialSettings } : {}),
      env,
      flags: {
        'execution.heartbeat_interval': flags.heartbeatInterval,
        'execution.agent_lost_threshold': flags.agentLostThreshold,
        'auth.secret_scoping': flags.secretScoping,
        'auth.secret_liveness_mode': flags.secretLivenessMode,
        'auth.max_attempt_credential_lifetime': flags.maxAttemptCredentialLifetime,
      },
    });
    cfg.credentials = config;
    ex.heartbeatIntervalMs = Math.round(config.heartbeatIntervalSeconds * 1000);
    ex.agentLostThresholdMs = Math.round(config.agentLostThresholdSeconds * 1000);
  } catch (err) {
    if (isLeoflowError(err)) throw new CliError(err.message, 2, err.code);
    throw err;
  }
  return cfg;
}

/**
 * Declares every flag standaloneConfig reads, so each command that builds a Lite configuration
 * (`standalone` runs it, `doctor` inspects it) accepts exactly the same flags.
 */
export function addStandaloneOptions(cmd: Command): Command {
  return cmd
    .option('--data-dir <dir>', 'data directory (database, keys, admin token)', undefined)
    .option(
      '--config <file>',
      'the server configuration file, YAML (auth.*, execution.*, executor.*; docs/configuration.md); also LEOFLOW_CONFIG_FILE',
    )
    .option('--http-port <port>', 'REST API port (default 8080; 0 picks a free one)')
    .option('--agent-port <port>', 'agent RPC port (default 8793; 0 picks a free one)')
    .option('--host <host>', 'REST API listen address (default 127.0.0.1)')
    .option(
      '--dags-folder <dir>',
      'load every DAG folder (with leoflow.yaml) under this folder at start',
    )
    .option('--database-url <url>', 'use PostgreSQL instead of the embedded SQLite file')
    .option(
      '--database-schema <schema>',
      "PostgreSQL: the schema of this cell's store (default public); each cell sharing one database needs its own",
    )
    .option('--heartbeat-interval <duration>', 'agent heartbeat interval (default 15s)')
    .option('--agent-lost-threshold <duration>', 'fail attempts silent for this long (default 90s)')
    .option(
      '--dispatch-lost-threshold <duration>',
      'fail attempts whose agent never started (default 3m)',
    )
    .option(
      '--attempt-uid-range <first-last|off>',
      'when root, run every attempt under its own uid/gid from this range, which no account may use (default 1879048192-1879113727; "off" uses --run-as-user)',
    )
    .option(
      '--attempt-nproc-limit <n>',
      'RLIMIT_NPROC of each attempt uid, via prlimit (default 4096; 0 does not apply it)',
    )
    .option(
      '--run-as-user <user>',
      'when root and --attempt-uid-range is off, run every task as this one user (default nobody; "none" disables)',
    )
    .option('--log-level <level>', 'debug, info, warn, error (default info)')
    .option(
      '--secret-scoping <mode>',
      'enforce (default), permissive or off: which Variables/Connections a task receives (permissive/off: migration modes)',
    )
    .option(
      '--secret-liveness-mode <mode>',
      'enforce (default) or observe: refuse secrets to attempts that are no longer live (observe: rollout mode)',
    )
    .option(
      '--max-attempt-credential-lifetime <duration>',
      'renewal ceiling for one attempt credential (default 24h; 0 disables)',
    )
    .option(
      '--metrics-port <port>',
      'Prometheus /metrics listener on 127.0.0.1 (default 9464; 0 picks a free one)',
    )
    .option(
      '--log-max-line-bytes <n>',
      'longer log lines are cut to this many bytes, with a marker (default 131072)',
    )
    .option(
      '--log-max-bytes-per-attempt <n>',
      'log bytes stored per attempt; past it lines are counted in one closing line (default 268435456)',
    )
    .option(
      '--log-write-grace <duration>',
      'an ended attempt may still write log lines this long (default 5m)',
    )
    .option(
      '--standby-agents <n>',
      'pre-started, credential-less agents waiting for an attempt (default 2; 0 starts each on demand)',
    )
    .option(
      '--vault-seed <dir>',
      'at start, import connections.json / variables.json (Airflow export format) from <dir> for names not yet defined',
    )
    .option(
      '--door-port <port>',
      'run the runner door on its own port (0 picks a free one); nothing else answers under /runners/',
    )
    .option('--door-host <host>', 'the door listen address (default 127.0.0.1)')
    .option(
      '--door-url <url>',
      "the door's public base URL that launch commands name (default: http://<door host>:<port>)",
    )
    .option(
      '--cell-port <port>',
      "this cell's internal endpoint for a separate `leoflow door` (needs --door-keys-file)",
    )
    .option(
      '--cell-name <name>',
      "this cell's name in the directory: it serves runner sessions only of tenants placed on it",
    )
    .option('--door-keys-file <file>', 'the door-public.jwks.json of the doors this cell trusts')
    .option(
      '--directory-schema <schema>',
      'PostgreSQL: the schema of the directory (runners, cells, placements); default leoflow_directory',
    )
    .option('--agent-tls-cert <pem>', 'serve the agent RPC over TLS with this certificate')
    .option('--agent-tls-key <pem>', 'the private key for --agent-tls-cert')
    .option(
      '--agent-tls-ca <pem>',
      'CA bundle agents use to verify the certificate (when not publicly trusted)',
    );
}

export function registerStandalone(program: Command): void {
  addStandaloneOptions(program.command('standalone'))
    .description('run Leoflow Lite: API, scheduler, agent RPC and executor in one process (SQLite)')
    .action(async (flags: StandaloneFlags) => {
      const cfg = await standaloneConfig(flags);
      const { startControlPlane } = await import('@leoflow/server');
      const cp = await startControlPlane(cfg);
      const lines = [
        'Leoflow Lite is running.',
        `  REST API     ${cp.httpUrl}/api/v1`,
        cp.ui
          ? `  web app      ${cp.ui.url}`
          : '  web app      (not built: run `npm run build` to build packages/ui)',
        ...(cp.ui?.signInUrl
          ? [
              `  sign in      ${cp.ui.signInUrl}`,
              '               (one use, valid 10 minutes: signs this browser in as the admin token)',
            ]
          : []),
        `  API docs     ${cp.httpUrl}/api/v1/docs (OpenAPI 3.1: /api/v1/openapi.json)`,
        ...(cp.doorUrl !== null ? [`  runner door  ${cp.doorUrl}/runners/<token>/`] : []),
        `  agent RPC    ${cp.agentUrl} (gRPC over HTTP/2${cfg.agent.tls ? ', TLS' : ', cleartext on loopback'})`,
        `  metrics      ${cp.metricsUrl ?? '(off)'}`,
        `  data dir     ${cfg.dataDir}`,
        `  admin token  ${cp.adminTokenFile} (mode 0600; the CLI reads it from ./.leoflow, or set LEOFLOW_TOKEN)`,
        `  DAGs folder  ${cfg.dagsFolder ?? '(none; push DAGs with `leoflow dags push <dir>`)'}`,
        cp.isolation.mode === 'per-attempt'
          ? `  tasks run as a uid of their own each, from ${cp.isolation.range.first}-${cp.isolation.range.last}`
          : cp.isolation.mode === 'shared'
            ? `  tasks run as ${cp.isolation.runAs.user} (uid ${cp.isolation.runAs.uid}), all attempts under that one uid`
            : '  tasks run as this user: task code can read the data directory (run as root to give every attempt its own uid)',
        `  work root    ${cp.workRoot}`,
        '',
        `Try: LEOFLOW_URL=${cp.httpUrl} npx leoflow runs trigger hello --wait`,
        '',
      ];
      process.stdout.write(lines.join('\n'));
      let closing = false;
      const shutdown = (signal: string) => {
        if (closing) process.exit(130);
        closing = true;
        process.stdout.write(
          `\n${signal}: stopping (running attempts are stopped; press again to force)\n`,
        );
        void cp.close().then(() => process.exit(0));
      };
      process.on('SIGINT', () => shutdown('SIGINT'));
      process.on('SIGTERM', () => shutdown('SIGTERM'));
    });
}

async function readConfigFile(file: string): Promise<Record<string, unknown>> {
  const { readFile } = await import('node:fs/promises');
  const { parse } = await import('yaml');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new CliError(
      `cannot read the config file ${file}; check the path given to --config / LEOFLOW_CONFIG_FILE`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  const parsed: unknown = parse(text);
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new CliError(
      `${file} must be a YAML mapping of settings (e.g. "auth:\n  secret_scoping: enforce")`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  return parsed as Record<string, unknown>;
}
