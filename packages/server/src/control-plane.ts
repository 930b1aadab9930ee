import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  agentTokenTtlSeconds,
  dagSpecHash,
  formatDiagnostic,
  isActive,
  settlingGraceSeconds,
  type Clock,
} from '@leoflow/core';
import type { Logger } from 'pino';
import { AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS, AgentTokenIssuer } from './auth/agent-token.js';
import { keyRetentionSeconds, loadSigningKeyring } from './auth/signing-keys.js';
import { CachingAgentTokenVerifier } from './auth/token-cache.js';
import { AttemptRecorder } from './credentials/attempt-record.js';
import { SecretDelivery } from './credentials/secret-delivery.js';
import { seedVault } from './credentials/vault-seed.js';
import { CredentialMetrics, startMetricsServer, type MetricsServer } from './metrics/index.js';
import { loadKeyring, VaultService } from './vault/index.js';
import { UserTokenIssuer } from './auth/user-token.js';
import { ApiTokens } from './auth/api-tokens.js';
import { ADMIN_TOKEN_FILE } from './config/data-dir-layout.js';
import { agentUrl as agentUrlOf, type ServerConfig } from './config/server-config.js';
import { compileDagFolder, findDagFolders } from './dags/compile-folder.js';
import { checkDeclarations } from './dags/registration.js';
import type { Executor } from './executor/executor.js';
import { resolveTaskIsolation, type TaskIsolation } from './executor/run-as-user.js';
import {
  ensureInstallId,
  ensureWorkRoot,
  installTaskSdk,
  workRootFor,
} from './executor/work-root.js';
import { SubprocessExecutor } from './executor/subprocess-executor.js';
import { createAgentAuthentication } from './rpc/agent-auth.js';
import { createAgentService } from './rpc/agent-service.js';
import { agentChannelMode, startAgentRpcServer } from './rpc/agent-server.js';
import { AttemptLifecycle } from './scheduler/attempt-lifecycle.js';
import { RunOperations } from './scheduler/run-operations.js';
import { Scheduler, type SchedulerTimings } from './scheduler/scheduler.js';
import { SpecCache } from './scheduler/spec-cache.js';
import { openStore } from './store/index.js';
import type { Store } from './store/store.js';
import { createLogger } from './util/logger.js';
import { systemClock } from './util/system-clock.js';
import { buildRestApi } from './tenancy/rest-api.js';
import { faultsFromEnv, type FaultInjector } from './util/test-faults.js';
import { uiForControlPlane } from './ui/setup.js';

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
  scheduler: Scheduler;
  executor: Executor;
  close(): Promise<void>;
}

export interface ControlPlaneOptions {
  clock?: Clock;
  logger?: Logger;
  executor?: Executor;
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
  const isolation = resolveTaskIsolation(cfg.execution);
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
  const tokens = new AgentTokenIssuer(agentKeys, ttlSeconds);
  const verifier = new CachingAgentTokenVerifier(tokens);
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
  const vault = new VaultService(store, keyring, {
    clock,
    onUnreadable: (v) =>
      logger.error(
        { kind: v.kind, tenant_id: v.tenant_id, id: v.id, key_id: v.key_id, code: v.code },
        'a stored secret cannot be decrypted; it is not delivered',
      ),
  });
  if (cfg.vaultSeedDir) await seedVault(vault, cfg.tenantId, cfg.vaultSeedDir, clock.now(), logger);
  const adminTokenFile = join(cfg.dataDir, ADMIN_TOKEN_FILE);
  await ensureAdminToken(adminTokenFile, apiTokens, cfg.tenantId, logger);

  let scheduler: Scheduler | null = null;
  const poke = () => scheduler?.poke();
  const specs = new SpecCache(store);
  const lifecycle = new AttemptLifecycle(store, specs, clock, logger, poke);
  const runs = new RunOperations(store, clock, poke);

  const workRoot = cfg.execution.workDir ?? workRootFor(ensureInstallId(cfg.dataDir));
  ensureWorkRoot(workRoot);
  let taskNodeModules = cfg.execution.taskNodeModules;
  if (cfg.execution.sdkBundle !== null) {
    taskNodeModules = installTaskSdk(workRoot, cfg.execution.sdkBundle);
  } else {
    logger.warn(
      'no @leoflow/sdk bundle (packages/sdk/dist/leoflow-sdk.mjs): node tasks import it from the installation, which task uids cannot reach when it sits in a 0700 directory; run `npm run build`',
    );
  }
  const executor =
    opts.executor ??
    new SubprocessExecutor({
      agentEntry: cfg.execution.agentEntry,
      workDir: workRoot,
      diagnosticsDir: join(cfg.dataDir, 'agents'),
      isolation,
      keepWorkDirs: cfg.execution.keepWorkDirs,
      agentCaFile: cfg.agent.tls?.caFile ?? null,
      taskNodeModules,
      standbyAgents: cfg.execution.standbyAgents,
      logger,
    });

  // Secrets travel in cleartext only over loopback; anywhere else the channel must be TLS.
  const channelSecure = agentChannelMode(cfg.agent) !== 'cleartext-non-loopback';
  if (!channelSecure) {
    logger.warn(
      { host: cfg.agent.host },
      'the agent channel is cleartext on a non-loopback address: Variables and Connections will not be delivered until agent TLS is configured',
    );
  }
  const records = new AttemptRecorder(store, clock, logger, {
    scoping: credentialCfg.secretScoping,
    liveness: credentialCfg.secretLivenessMode,
  });
  const secrets = new SecretDelivery({
    store,
    vault,
    specs,
    clock,
    logger,
    scoping: credentialCfg.secretScoping,
    liveness: credentialCfg.secretLivenessMode,
    channelSecure,
    metrics,
    records,
  });

  const rpc = await startAgentRpcServer({
    impl: createAgentService({
      store,
      specs,
      clock,
      tokens,
      lifecycle,
      logger,
      heartbeatIntervalMs: cfg.execution.heartbeatIntervalMs,
      maxCredentialLifetimeMs: credentialCfg.maxAttemptCredentialLifetimeSeconds * 1000,
      secrets,
      onChange: poke,
      onRenewal: (outcome) => metrics.renewal(outcome),
      logLimits: cfg.logs,
      faults,
      records,
    }),
    host: cfg.agent.host,
    port: cfg.agent.port,
    tls: cfg.agent.tls
      ? { cert: readFileSync(cfg.agent.tls.certFile), key: readFileSync(cfg.agent.tls.keyFile) }
      : null,
    auth: createAgentAuthentication({ verifier, clock, records }),
    onInternalError: (err) => logger.error({ err }, 'agent RPC failed'),
  });
  const agentUrl = agentUrlOf(cfg, rpc.port);

  // An agent that exits without its report landing (crash, OOM kill) fails its attempt now
  // rather than after the agent-lost threshold.
  executor.onAgentExit((exit) => {
    void (async () => {
      const ti = await store.getTaskInstanceById(exit.identity.task_instance_id);
      if (!ti || ti.try_number !== exit.identity.try_number || !isActive(ti.state)) return;
      const how = exit.signal ? `signal ${exit.signal}` : `code ${exit.exitCode ?? '?'}`;
      await lifecycle.fail(ti.id, ti.try_number, {
        reason: `agent exited (${how}) without reporting the task's outcome`,
        dispatchGen: exit.identity.dispatch_gen,
      });
    })().catch((err: unknown) => logger.error({ err }, 'agent exit bookkeeping failed'));
  });

  scheduler = new Scheduler({
    store,
    specs,
    clock,
    executor,
    tokens,
    lifecycle,
    logger,
    agentUrl: () => agentUrl,
    faults,
    timings: schedulerTimings(cfg.execution),
  });

  if (cfg.dagsFolder) await loadDagsFolder(cfg.dagsFolder, store, cfg.tenantId, clock, logger);

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
    revocation: { executor, evictAttempt: (ti, t) => verifier.evictAttempt(ti, t) },
    vaultKeyring: { dataDir: cfg.dataDir, source: keyringSource, file: keyringFile ?? null },
    doctorConfig: () => ({
      ...cfg,
      execution: { ...cfg.execution, workDir: workRoot },
      http: { ...cfg.http, port: bound.http },
      agent: { ...cfg.agent, port: bound.agent },
      metrics: { ...cfg.metrics, port: bound.metrics },
    }),
    platformTenantId: cfg.tenantId,
    version: LEOFLOW_VERSION,
    onChange: poke,
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
  if (executor instanceof SubprocessExecutor)
    executor.warm(agentUrl, cfg.execution.heartbeatIntervalMs);
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
    scheduler,
    executor,
    async close() {
      await scheduler?.stop();
      await api.close();
      await executor.close();
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
