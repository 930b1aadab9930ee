import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  agentTokenTtlSeconds,
  dagSpecHash,
  formatDiagnostic,
  LeoflowError,
  settlingGraceSeconds,
  type Clock,
} from '@leoflow/core';
import type { Logger } from 'pino';
import { AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS } from './auth/agent-token.js';
import { keyRetentionSeconds, loadSigningKeyring } from './auth/signing-keys.js';
import { seedVault } from './credentials/vault-seed.js';
import { CredentialMetrics, startMetricsServer, type MetricsServer } from './metrics/index.js';
import { loadKeyring } from './vault/index.js';
import { UserTokenIssuer } from './auth/user-token.js';
import { ApiTokens } from './auth/api-tokens.js';
import { ADMIN_TOKEN_FILE } from './config/data-dir-layout.js';
import { agentUrl as agentUrlOf, type ServerConfig } from './config/server-config.js';
import { compileDagFolder, findDagFolders } from './dags/compile-folder.js';
import {
  checkDeclarations,
  checkExecutorChoices,
  type ExecutorPolicy,
} from './dags/registration.js';
import { createKubernetesExecutor, executorPolicy } from './executor/kubernetes/configured.js';
import type { Executor } from './executor/executor.js';
import { resolveTaskIsolation, type TaskIsolation } from './executor/run-as-user.js';
import {
  ensureInstallId,
  ensureWorkRoot,
  installTaskSdk,
  workRootFor,
} from './executor/work-root.js';
import { Executors } from './executor/executors.js';
import { SubprocessExecutor } from './executor/subprocess-executor.js';
import { agentChannelMode, startAgentRpcServer } from './rpc/agent-server.js';
import type { RunOperations } from './scheduler/run-operations.js';
import type { Scheduler, SchedulerTimings } from './scheduler/scheduler.js';
import { openStore } from './store/index.js';
import type { Store } from './store/store.js';
import { createLogger } from './util/logger.js';
import { systemClock } from './util/system-clock.js';
import { buildRestApi } from './tenancy/rest-api.js';
import { faultsFromEnv, type FaultInjector } from './util/test-faults.js';
import { uiForControlPlane } from './ui/setup.js';
import { assemblePlane } from './plane-assembly.js';

export const LEOFLOW_VERSION = '0.1.0';

/**
 * The scheduler's timings from the execution config. Settling grace (how long a new leader waits
 * before reaping) is 2 × agent-lost, the value the boot ladder validates (settlingGraceSeconds).
 */
export function schedulerTimings(e: ServerConfig['execution']): SchedulerTimings {
  return {
    tickMs: e.schedulerTickMs,
    heartbeatIntervalMs: e.heartbeatIntervalMs,
    agentLostThresholdMs: e.agentLostThresholdMs,
    dispatchLostThresholdMs: e.dispatchLostThresholdMs,
    timeoutGraceMs: e.timeoutGraceMs,
    settlingGraceMs: settlingGraceSeconds(e.agentLostThresholdMs / 1000) * 1000,
  };
}
export { ADMIN_TOKEN_FILE };

export interface ControlPlane {
  httpUrl: string;
  metricsUrl: string | null;
  keyringFile: string | null;
  agentUrl: string;
  adminTokenFile: string;
  /** how attempts are isolated (per-attempt uids, one shared user, or not at all) */
  isolation: TaskIsolation;
  /** this installation's work root (/tmp/leoflow-work-<install id> by default) */
  workRoot: string;
  /** the web app's address, and a one-time sign-in URL for the admin token (null: no web app built) */
  ui: { url: string; signInUrl: string | null } | null;
  store: Store;
  /** trigger, clear and mark runs (what the REST API calls) */
  runs: RunOperations;
  scheduler: Scheduler;
  /** the default executor (the only one Lite configures) */
  executor: Executor;
  executors: Executors;
  close(): Promise<void>;
}

export interface ControlPlaneOptions {
  clock?: Clock;
  logger?: Logger;
  executor?: Executor;
  /**
   * Wraps the executor (the configured one, or `executor`) before anything uses it: the executor
   * contract suite observes what an executor is handed this way.
   */
  decorateExecutor?: (executor: Executor) => Executor;
  /** test-only crash points; default: from LEOFLOW_TEST_FAULT + LEOFLOW_TEST_FAULT_ARM */
  faults?: FaultInjector;
}

/** Starts everything Lite runs in one process: store, scheduler, agent RPC, REST API. */
export async function startControlPlane(
  cfg: ServerConfig,
  opts: ControlPlaneOptions = {},
): Promise<ControlPlane> {
  const clock = opts.clock ?? systemClock;
  const logger = opts.logger ?? createLogger(cfg.logLevel);
  // Before anything is written: a uid range that overlaps an account refuses boot.
  const isolation = resolveTaskIsolation(cfg.subprocess);
  const faults = opts.faults ?? faultsFromEnv(process.env, logger);
  prepareDataDir(cfg.dataDir);

  const store = await openStore(cfg.database);
  await store.migrate();
  await store.ensureTenant(cfg.tenantId, cfg.tenantId, clock.now());

  const credentialCfg = cfg.credentials;
  const ttlSeconds = agentTokenTtlSeconds(cfg.execution.heartbeatIntervalMs / 1000);
  const agentKeys = await loadSigningKeyring(cfg.dataDir, 'agent', {
    retainSeconds: keyRetentionSeconds(ttlSeconds, AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS),
    clock: () => clock.now(),
  });
  // Retained forever: the admin token has no exp.
  const userKeys = await loadSigningKeyring(cfg.dataDir, 'user');
  const users = new UserTokenIssuer(userKeys);
  const apiTokens = new ApiTokens(store, users, clock);
  const metrics = new CredentialMetrics();

  // No fixed key: Lite generates its vault keyring on first start (mode 0600).
  const {
    keyring,
    file: keyringFile,
    created: keyringCreated,
    source: keyringSource,
  } = await loadKeyring({
    edition: 'lite',
    dataDir: cfg.dataDir,
    env: process.env,
  });
  if (keyringCreated) logger.info({ file: keyringFile }, 'generated the vault encryption keyring');

  const workRoot = cfg.subprocess.workDir ?? workRootFor(ensureInstallId(cfg.dataDir));
  ensureWorkRoot(workRoot);
  let taskNodeModules = cfg.subprocess.taskNodeModules;
  if (cfg.subprocess.sdkBundle !== null) {
    taskNodeModules = installTaskSdk(workRoot, cfg.subprocess.sdkBundle);
  } else {
    logger.warn(
      'no @leoflow/sdk bundle (packages/sdk/dist/leoflow-sdk.mjs): node tasks import it from the installation, which task uids cannot reach when it sits in a 0700 directory; run `npm run build`',
    );
  }
  // Every configured executor by name; the test's own executor stands in for its kind.
  const built = new Map<string, Executor>();
  if (opts.executor) built.set(opts.executor.name, opts.executor);
  if (!built.has('subprocess')) {
    built.set(
      'subprocess',
      new SubprocessExecutor({
        agentEntry: cfg.subprocess.agentEntry,
        workDir: workRoot,
        diagnosticsDir: join(cfg.dataDir, 'agents'),
        isolation,
        keepWorkDirs: cfg.subprocess.keepWorkDirs,
        agentCaFile: cfg.agent.tls?.caFile ?? null,
        taskNodeModules,
        standbyAgents: cfg.subprocess.standbyAgents,
        logger,
      }),
    );
  }
  if (cfg.kubernetes && !built.has('kubernetes')) {
    built.set('kubernetes', await createKubernetesExecutor(cfg.kubernetes, store, logger));
  }
  const defaultName = opts.executor?.name ?? cfg.defaultExecutor;
  const configured = built.get(defaultName);
  if (!configured) {
    throw new LeoflowError(
      'LF_CONFIG_INVALID',
      `executor.default is "${defaultName}", which is not configured (configured: ${[...built.keys()].join(', ')})`,
    );
  }
  const executor = opts.decorateExecutor ? opts.decorateExecutor(configured) : configured;
  const executors = new Executors(
    [executor, ...[...built.values()].filter((e) => e !== configured)],
    executor.name,
  );

  // Secrets travel in cleartext only over loopback; anywhere else the channel must be TLS.
  const channelSecure = agentChannelMode(cfg.agent) !== 'cleartext-non-loopback';
  if (!channelSecure) {
    logger.warn(
      { host: cfg.agent.host },
      'the agent channel is cleartext on a non-loopback address: Variables and Connections will not be delivered until agent TLS is configured',
    );
  }
  let agentUrl = '';
  const parts = assemblePlane({
    store,
    clock,
    logger,
    agentKeys,
    agentTokenTtlSeconds: ttlSeconds,
    vaultKeyring: keyring,
    onVaultUnreadable: (v) =>
      logger.error(
        { kind: v.kind, tenant_id: v.tenant_id, id: v.id, key_id: v.key_id, code: v.code },
        'a stored secret cannot be decrypted; it is not delivered',
      ),
    executors,
    agentUrl: () => agentUrl,
    timings: schedulerTimings(cfg.execution),
    credentials: {
      scoping: credentialCfg.secretScoping,
      liveness: credentialCfg.secretLivenessMode,
      maxCredentialLifetimeMs: credentialCfg.maxAttemptCredentialLifetimeSeconds * 1000,
    },
    channelSecure,
    metrics,
    logLimits: cfg.logs,
    faults,
  });
  const { vault, runs, verifier, scheduler } = parts;
  if (cfg.vaultSeedDir) await seedVault(vault, cfg.tenantId, cfg.vaultSeedDir, clock.now(), logger);
  const adminTokenFile = join(cfg.dataDir, ADMIN_TOKEN_FILE);
  await ensureAdminToken(adminTokenFile, apiTokens, cfg.tenantId, logger);

  const rpc = await startAgentRpcServer({
    impl: parts.agentService,
    host: cfg.agent.host,
    port: cfg.agent.port,
    tls: cfg.agent.tls
      ? { cert: readFileSync(cfg.agent.tls.certFile), key: readFileSync(cfg.agent.tls.keyFile) }
      : null,
    auth: parts.agentAuth,
    onInternalError: (err) => logger.error({ err }, 'agent RPC failed'),
  });
  agentUrl = agentUrlOf(cfg, rpc.port);

  if (cfg.dagsFolder)
    await loadDagsFolder(cfg.dagsFolder, store, cfg.tenantId, clock, logger, {
      policy: executorPolicy(executors.names(), cfg.kubernetes),
    });

  const bound = { http: cfg.http.port, agent: rpc.port, metrics: cfg.metrics.port };
  const ui = uiForControlPlane(cfg, clock, process.env);
  // Doctor reports the ports this process really bound.
  const api = buildRestApi({
    store,
    vault,
    runs,
    clock,
    logger,
    tokens: apiTokens,
    userKeys,
    revocation: { executors, evictAttempt: (ti, t) => verifier.evictAttempt(ti, t) },
    vaultKeyring: { dataDir: cfg.dataDir, source: keyringSource, file: keyringFile ?? null },
    doctorConfig: () => ({
      ...cfg,
      subprocess: { ...cfg.subprocess, workDir: workRoot },
      http: { ...cfg.http, port: bound.http },
      agent: { ...cfg.agent, port: bound.agent },
      metrics: { ...cfg.metrics, port: bound.metrics },
    }),
    platformTenantId: cfg.tenantId,
    executorPolicy: executorPolicy(executors.names(), cfg.kubernetes),
    version: LEOFLOW_VERSION,
    onChange: parts.poke,
    ui: ui.deps,
  });
  await api.listen({ host: cfg.http.host, port: cfg.http.port });
  const addr = api.server.address();
  const httpPort = typeof addr === 'object' && addr ? addr.port : cfg.http.port;
  bound.http = httpPort;
  let metricsServer: MetricsServer | null = null;
  if (cfg.metrics.port !== null) {
    metricsServer = await startMetricsServer(metrics.registry, cfg.metrics.host, cfg.metrics.port);
    bound.metrics = metricsServer.port;
  }
  executors.warm({ agentUrl, heartbeatIntervalMs: cfg.execution.heartbeatIntervalMs });
  scheduler.start();

  return {
    httpUrl: `http://${cfg.http.host}:${httpPort}`,
    metricsUrl: metricsServer ? `http://${cfg.metrics.host}:${metricsServer.port}/metrics` : null,
    keyringFile: keyringFile ?? null,
    agentUrl,
    adminTokenFile,
    isolation,
    workRoot,
    ui: ui.deps.staticDir
      ? {
          url: `http://${cfg.http.host}:${httpPort}/`,
          signInUrl: ui.signInUrl(`http://${cfg.http.host}:${httpPort}`, adminTokenFile),
        }
      : null,
    store,
    runs,
    scheduler,
    executor,
    executors,
    async close() {
      await scheduler.stop();
      await api.close();
      await executors.close();
      await rpc.close();
      await metricsServer?.close();
      await store.close();
    },
  };
}

function prepareDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // The data directory holds signing keys, the admin token and the database: owner only.
  chmodSync(dir, 0o700);
}

/**
 * Standalone's first start writes an admin token of the platform tenant (mode 0600) and puts it
 * on record so it can be revoked like any other; a token file from an earlier version, minted
 * before tokens were recorded, is adopted on the next start. A revoked admin token is never
 * re-minted behind the operator's back: delete the file to get a new one.
 */
async function ensureAdminToken(
  file: string,
  tokens: ApiTokens,
  tenantId: string,
  logger: Logger,
): Promise<void> {
  const existing = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
  if (existing !== '') {
    if (!(await tokens.adopt(existing, 'admin'))) {
      logger.warn(
        { file },
        'the admin token file holds a token this server does not accept (revoked, or signed by a key no longer on the keyring); delete the file and restart to mint a new one',
      );
    }
    return;
  }
  const { token } = await tokens.create({
    tenant_id: tenantId,
    role: 'admin',
    name: 'admin',
    created_by: 'system:first-start',
  });
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
}

export async function loadDagsFolder(
  folder: string,
  store: Store,
  tenantId: string,
  clock: Clock,
  logger: Logger,
  opts: { policy?: ExecutorPolicy } = {},
): Promise<{ loaded: string[]; failed: string[] }> {
  const loaded: string[] = [];
  const failed: string[] = [];
  for (const dir of findDagFolders(folder)) {
    // A DAG folder symlinked to somewhere outside the dags folder is refused like a script is.
    const result = compileDagFolder(dir, { within: folder });
    if (!result.ok) {
      failed.push(dir);
      logger.error(
        { file: result.file, errors: result.errors.length },
        `DAG not loaded:\n${result.errors.map(formatDiagnostic).join('\n')}`,
      );
      continue;
    }
    try {
      if (opts.policy) checkExecutorChoices(opts.policy, tenantId, result.spec);
      await checkDeclarations(store, tenantId, result.spec);
    } catch (err) {
      failed.push(dir);
      logger.error({ file: result.file }, `DAG not loaded: ${(err as Error).message}`);
      continue;
    }
    const out = await store.putDagVersion(
      tenantId,
      result.spec,
      dagSpecHash(result.spec),
      clock.now(),
    );
    loaded.push(result.spec.dag_id);
    logger.info(
      { dag_id: result.spec.dag_id, version: out.version, created: out.created },
      'DAG loaded',
    );
  }
  return { loaded, failed };
}
