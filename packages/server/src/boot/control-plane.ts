import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import {
  agentTokenTtlSeconds,
  ConfigError,
  configError,
  dagSpecHash,
  formatDiagnostic,
  LeoflowError,
  settlingGraceSeconds,
  warmPoolPrerequisiteProblems,
  type Clock,
} from '@leoflow/core';
import type { Logger } from 'pino';
import { AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS } from '../auth/agent-token.js';
import { keyRetentionSeconds, loadSigningKeyring } from '../auth/signing-keys.js';
import { seedVault } from '../vault/vault-seed.js';
import { CredentialMetrics } from '../rpc/credential-metrics.js';
import { startMetricsServer, type MetricsServer } from '../util/metrics-server.js';
import { loadKeyring } from '../vault/index.js';
import { UserTokenIssuer } from '../auth/user-token.js';
import { ApiTokens } from '../auth/api-tokens.js';
import { ADMIN_TOKEN_FILE } from '../config/data-dir-layout.js';
import { agentUrl as agentUrlOf, type ServerConfig } from '../config/server-config.js';
import { compileDagFolder, findDagFolders } from '../scheduler/dags/compile-folder.js';
import { checkDeclarations, checkExecutorChoices } from '../scheduler/dags/registration.js';
import { type ExecutorPolicy } from '../executor/executor-policy.js';
import { createKubernetesExecutor, executorPolicy } from '../executor/kubernetes/configured.js';
import type { Executor } from '../executor/executor.js';
import { resolveTaskIsolation, type TaskIsolation } from '../executor/run-as-user.js';
import {
  ensureInstallId,
  ensureWorkRoot,
  installTaskSdk,
  workRootFor,
} from '../executor/work-root.js';
import { Executors } from '../executor/executors.js';
import { SubprocessExecutor } from '../executor/subprocess-executor.js';
import { agentChannelMode, startAgentRpcServer } from '../rpc/agent-server.js';
import { wireExchange } from './exchange-wiring.js';
import { loadAgentTls, reloadAgentTlsOnChange } from '../rpc/agent-tls.js';
import { reloadSigningKeyringOnChange, VaultKeyringReloader } from '../vault/key-reload.js';
import type { RunOperations } from '../scheduler/run-operations.js';
import type { Scheduler, SchedulerTimings } from '../scheduler/scheduler.js';
import { openStore } from '../store/index.js';
import { directoryOnStore, openDirectory, type Directory } from '../store/kysely-directory.js';
import type { CellTopology } from '../runners/cells/cell-admin.js';
import {
  startCellDoorEndpoint,
  type CellDoorEndpoint,
} from '../runners/cells/cell-door-endpoint.js';
import { createCellSessionServer, type CellSessionServer } from '../runners/cells/cell-session.js';
import { servedTenants, servesTenant } from '../runners/cells/placement.js';
import { startSshRunners } from '../runners/ssh-runner-plane.js';
import { AssignmentBroker } from '../executor/assignments/assignment-broker.js';
import { requeueFence } from '../executor/assignments/requeue-fence.js';
import { createAssignmentHandlers } from '../rpc/assignment-rpc.js';
import { RunnerExecutor } from '../executor/runner-executor.js';
import type { WorkerTokenClaims } from '../auth/worker-token.js';
import { wireWarmPools, type WarmPoolWiringInput, type WarmPools } from './warm-pool-wiring.js';
import { ConnectionSecrets } from '../runners/cells/connection-secrets.js';
import { closeMovedSessions } from '../runners/cells/moved-sessions.js';
import { RunnerSessions, SESSION_CLOSE } from '../runners/cells/runner-sessions.js';
import { DoorCredentialVerifier } from '../runners/door/door-credential.js';
import { runDoor, trustedDoorKeys, type RunningDoor } from './door-process.js';
import type { Store } from '../store/store.js';
import { createLogger } from '../util/logger.js';
import { systemClock } from '../util/system-clock.js';
import { buildRestApi } from './rest-api.js';
import { faultsFromEnv, type FaultInjector } from '../util/test-faults.js';
import { uiForControlPlane } from './web-app-setup.js';
import { assemblePlane } from './plane-assembly.js';
import type { ServerRole } from '../config/pro-config.js';
import { NeverLeads, SoleLeadership, type Leadership } from '../scheduler/leadership/leadership.js';
import { LeaseElector } from '../scheduler/leadership/lease-elector.js';
import { openLeaseStore } from '../scheduler/leadership/open-lease-store.js';
import { SCHEDULER_LEASE } from '../store/ports/leader-fence.js';
import { checkReadiness, type Readiness } from '../api/probes/readiness.js';
import { startProbeServer } from '../api/probes/probe-server.js';

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
  /** the door's base URL when this process runs one (Lite, --door-port), else null */
  doorUrl: string | null;
  /** this cell's internal endpoint for doors, when it has one */
  cellEndpointUrl: string | null;
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
  /** Lite's standalone, or the `leoflow server` role */
  role: ServerRole | 'standalone';
  /** whether this process schedules now (Lite: always; an `api` replica: never) */
  leading(): boolean;
  /** what /readyz answers */
  readiness(): Promise<Readiness>;
  /** warm pools, when enabled and configured (tests drive reconcile() directly) */
  warmPools: WarmPools | null;
  /** Lite: stops everything, running attempts included */
  close(): Promise<void>;
  /**
   * Pro's SIGTERM: /readyz turns 503, scheduling stops and the lease is released, in-flight
   * requests finish, and running agents are handed over (left running) rather than stopped.
   * Resolves true when all of it finished within graceMs, false when the grace ran out first.
   */
  drain(graceMs: number): Promise<boolean>;
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
  /** tests: a short worker token TTL and a fast renewal check */
  warmPools?: Pick<WarmPoolWiringInput, 'workerTokenTtlSeconds' | 'renewCheckMs'>;
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
  const pro = cfg.pro;
  if (pro) checkProConfig(cfg);
  // The CLI validated the whole credential plane; a caller that built the config itself is held
  // to warm pools' prerequisites here, before anything is opened or written.
  const warmPoolProblems = warmPoolPrerequisiteProblems(cfg.credentials);
  if (warmPoolProblems.length > 0) throw configError(warmPoolProblems);
  prepareDataDir(cfg.dataDir);

  const store = await openStore(cfg.database);
  await store.migrate();
  await store.ensureTenant(cfg.tenantId, cfg.tenantId, clock.now());
  // The directory the door reads: Lite's is the same SQLite file, Pro's a schema of its own.
  const directory =
    cfg.database.kind === 'sqlite'
      ? await directoryOnStore(store)
      : await openDirectory({
          kind: 'postgres',
          url: cfg.database.url,
          schema: cfg.directory.schema,
        });
  await directory.migrate();
  const runnerPlane = await startRunnerPlane(cfg, directory, clock, logger);
  // Attempts for runners wait here until a runner session takes them (executor: runner).
  const assignments = new AssignmentBroker(clock, {
    onMintError: (err) => logger.error({ err }, 'minting an assigned attempt token failed'),
    // A requeued assignment's token dies: the row moves to the next dispatch generation.
    refence: requeueFence(store, clock),
    onRefenceError: (err) => logger.error({ err }, 'fencing a requeued assignment failed'),
  });

  const credentialCfg = cfg.credentials;
  const ttlSeconds = agentTokenTtlSeconds(cfg.execution.heartbeatIntervalMs / 1000);
  // Pro: one keys directory every replica shares, so a token one signs verifies on all.
  const keysDir = pro?.keysDir ?? cfg.dataDir;
  const agentKeys = await loadSigningKeyring(keysDir, 'agent', {
    retainSeconds: keyRetentionSeconds(ttlSeconds, AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS),
    clock: () => clock.now(),
  });
  // Retained forever: the admin token has no exp.
  const userKeys = await loadSigningKeyring(keysDir, 'user');
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
    edition: pro ? 'pro' : 'lite',
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
  if (!built.has('runner')) {
    built.set(
      'runner',
      new RunnerExecutor({
        broker: assignments,
        store,
        onError: (err) => logger.error({ err }, 'runner attempt reconcile failed'),
      }),
    );
  }
  // execution.warm_pools_enabled with pools configured (refused above without the exchange
  // transport and liveness=enforce): pool pods, the worker stream, warm routing.
  const warmPoolsConfig = cfg.kubernetes?.warmPools;
  for (const pool of credentialCfg.warmPoolsEnabled ? (warmPoolsConfig ?? []) : []) {
    const defaults = cfg.kubernetes?.tenants[pool.tenant]?.defaultResources;
    if (Object.keys(defaults?.requests ?? {}).length + Object.keys(defaults?.limits ?? {}).length) {
      // Warm routing sends an attempt with resources to a cold pod (a pool pod carries none), and
      // a tenant's defaults give every attempt resources: this pool's pods would idle for good.
      logger.warn(
        { code: 'LF_WARM_POOL_UNUSED', tenant: pool.tenant, pool: pool.image },
        `LF_WARM_POOL_UNUSED: tenant ${pool.tenant} sets default_resources, so none of its attempts runs warm and this pool's pods stay idle; remove the tenant's default_resources or the pool`,
      );
    }
  }
  const warmPools =
    credentialCfg.warmPoolsEnabled && cfg.kubernetes && warmPoolsConfig?.length
      ? await wireWarmPools({
          kubernetes: { ...cfg.kubernetes, warmPools: warmPoolsConfig },
          agentKeys,
          clock,
          store,
          logger,
          agentUrl: () => agentUrl,
          heartbeatIntervalMs: cfg.execution.heartbeatIntervalMs,
          refence: requeueFence(store, clock),
          leading: () => leadership.fence() !== null,
          ...(opts.warmPools ?? {}),
        })
      : undefined;
  if (cfg.kubernetes && !built.has('kubernetes')) {
    const cold = await createKubernetesExecutor(
      cfg.kubernetes,
      store,
      logger,
      credentialCfg.agentTokenTransport,
      credentialCfg.exchangeBootstrap,
    );
    built.set('kubernetes', warmPools ? warmPools.route(cold) : cold);
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
  // auth.agent_token_transport=exchange: boot fails closed here (no Kubernetes client, a
  // cleartext non-loopback channel, no TokenReview permission) rather than at the first pod.
  const exchange =
    credentialCfg.agentTokenTransport === 'exchange'
      ? {
          ...(await wireExchange({
            kubernetes: cfg.kubernetes,
            channelMode: agentChannelMode(cfg.agent),
            metrics,
            bootstrap: credentialCfg.exchangeBootstrap,
            warmPools: credentialCfg.warmPoolsEnabled,
          })),
          // A pod annotated with a pool's key gets a worker token, once, if the pool made it.
          ...(warmPools ? { workerBootstrap: warmPools.manager } : {}),
        }
      : undefined;
  let agentUrl = '';
  // Created once the vault exists; a value under an unknown key id asks it for one reload.
  let vaultReloader: VaultKeyringReloader | null = null;
  const role: ServerRole | 'standalone' = pro?.role ?? 'standalone';
  const schedules = role !== 'api';
  const serves = role !== 'scheduler';
  let lease: Awaited<ReturnType<typeof openLeaseStore>> | null = null;
  let elector: LeaseElector | null = null;
  let leadership: Leadership;
  if (!pro) {
    leadership = new SoleLeadership();
  } else {
    // Every role reads the lease (readiness); only scheduling roles contend for it.
    lease = await openLeaseStore(cfg.database, pro.lease.renewIntervalMs);
    if (schedules) {
      elector = new LeaseElector({
        leases: lease.leases,
        // Fresh per process start: a restarted replica must not renew its predecessor's term.
        holder: `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`,
        ttlMs: pro.lease.ttlMs,
        renewIntervalMs: pro.lease.renewIntervalMs,
        safetyMarginMs: pro.lease.safetyMarginMs,
        logger: logger.child({ component: 'leadership' }),
      });
      leadership = elector;
    } else {
      leadership = new NeverLeads();
    }
  }
  let draining = false;
  const leaseRead = lease?.leases;
  const readiness = () =>
    checkReadiness({
      migrationStatus: () => store.migrationStatus(),
      leaseHolder: leaseRead ? () => leaseRead.current(SCHEDULER_LEASE) : null,
      leading: () => leadership.fence() !== null,
      leaderGates: schedules && pro !== undefined,
      takeoverMs: pro ? pro.lease.ttlMs + pro.lease.renewIntervalMs : 0,
      draining: () => draining,
    });
  const parts = assemblePlane({
    onVaultUnknownKey: async (ids) => {
      await vaultReloader?.onUnknownKey(ids);
    },
    store,
    clock,
    logger,
    agentKeys,
    agentTokenTtlSeconds: ttlSeconds,
    vaultKeyring: keyring,
    // runner tokens are sealed by this keyring too: rotation must re-encrypt them
    runnerTokens: directory,
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
    channelMode: agentChannelMode(cfg.agent),
    ...(exchange ? { exchange } : {}),
    metrics,
    logLimits: cfg.logs,
    faults,
    leadership,
    assignments: createAssignmentHandlers({
      broker: assignments,
      runnerById: async (id) => {
        const r = await directory.runnerById(id);
        return r && (await directory.getRunner(r.tenant_id, r.name));
      },
      store,
      clock,
      ...(warmPools
        ? { warm: { broker: warmPools.broker, awaitAssignment: warmPools.stream } }
        : {}),
    }),
    ...(warmPools
      ? {
          workerVerifier: warmPools.tokens,
          workerServing: (c: WorkerTokenClaims) =>
            warmPools.manager.serving(c.pool_key, c.pod_name, c.pod_uid),
        }
      : {}),
  });
  const { vault, runs, verifier, scheduler } = parts;
  // Rotations by another process (a replica, the CLI) reach this one without a restart.
  if (keyringSource !== 'env' && keyringFile !== undefined) {
    const watchedFile = keyringFile;
    vaultReloader = new VaultKeyringReloader({
      vault,
      load: async () =>
        (
          await loadKeyring({
            edition: pro ? 'pro' : 'lite',
            dataDir: cfg.dataDir,
            env: process.env,
          })
        ).keyring,
      clock,
      onError: (err) => logger.error({ code: err.code, file: watchedFile }, err.message),
      onApplied: (c) => logger.info({ ...c, file: watchedFile }, 'vault keyring reloaded'),
    });
    vaultReloader.watch(watchedFile);
  }
  const signingWatches = [agentKeys, userKeys].map((ring) =>
    reloadSigningKeyringOnChange(ring, {
      onError: (err) =>
        logger.error({ err, purpose: ring.purpose }, 'signing keyring reload failed'),
      onApplied: (kid) => logger.info({ kid, purpose: ring.purpose }, 'signing keyring reloaded'),
    }),
  );
  if (cfg.vaultSeedDir) await seedVault(vault, cfg.tenantId, cfg.vaultSeedDir, clock.now(), logger);
  const adminTokenFile = join(keysDir, ADMIN_TOKEN_FILE);
  await ensureAdminToken(adminTokenFile, apiTokens, cfg.tenantId, logger);

  const tlsFiles = cfg.agent.tls;
  const initialTls = tlsFiles ? await loadAgentTls(tlsFiles) : null;
  const rpc = await startAgentRpcServer({
    impl: parts.agentService,
    host: cfg.agent.host,
    port: cfg.agent.port,
    tls: initialTls?.tls ?? null,
    auth: parts.agentAuth,
    onInternalError: (err) => logger.error({ err }, 'agent RPC failed'),
  });
  // The operator's certificate files may be replaced while we run (renewal, a Secret update).
  const tlsReloader =
    tlsFiles && initialTls ? reloadAgentTlsOnChange(rpc, tlsFiles, initialTls, logger) : null;
  agentUrl = agentUrlOf(cfg, rpc.port);
  // Door sessions speak the agent service behind the same gate as the agent port.
  const cellSessions = createCellSessionServer({
    impl: parts.agentService,
    auth: parts.agentAuth,
    onInternalError: (err) => logger.error({ err }, 'agent RPC failed (runner session)'),
  });
  runnerPlane.serveSessions(cellSessions);
  // The cell dials its ssh runners and serves the same protocol on each channel. Only the
  // scheduler leader: its broker holds the attempts (a follower's sessions would idle), and a
  // replica that loses the lease hangs up at its next refresh while the new leader dials.
  const sshRunners = !schedules
    ? null
    : await startSshRunners({
        runners: directory,
        tenants: async () =>
          leadership.fence() === null
            ? []
            : servedTenants(directory, runnerPlane.topology, cfg.door.cellName, async () =>
                (await store.listTenants({ limit: 10_000, offset: 0 })).map((t) => t.id),
              ),
        connection: async (tenant_id, conn_id) =>
          (await vault.resolveConnections(tenant_id, [conn_id])).get(conn_id),
        agentEntry: cfg.subprocess.agentEntry,
        sessions: runnerPlane.sessions,
        serve: (who, stream) => cellSessions.serve(who, stream),
        logger: logger.child({ component: 'ssh-runners' }),
      });

  if (cfg.dagsFolder)
    await loadDagsFolder(cfg.dagsFolder, store, cfg.tenantId, clock, logger, {
      policy: executorPolicy(executors.names(), cfg.kubernetes),
    });

  const bound = { http: cfg.http.port, agent: rpc.port, metrics: cfg.metrics.port };
  const ui = uiForControlPlane(cfg, clock, process.env, store);
  // Doctor reports the ports this process really bound.
  const api = !serves
    ? null
    : buildRestApi({
        store,
        vault,
        runs,
        clock,
        logger,
        tokens: apiTokens,
        userKeys,
        revocation: {
          executors,
          evictAttempt: (ti, t) => verifier.evictAttempt(ti, t),
          livenessMode: credentialCfg.secretLivenessMode,
          tokenTtlMs: ttlSeconds * 1000,
        },
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
        directory,
        cellTopology: runnerPlane.topology,
        doorUrl: runnerPlane.doorUrl,
        onRunnerDeleted: runnerPlane.closeRunner,
        onRunnerRegistered: (r) => {
          if (r.kind === 'ssh') void sshRunners?.refresh();
        },
        onPlacementChanged: runnerPlane.closeMovedSessions,
        version: LEOFLOW_VERSION,
        onChange: parts.poke,
        ui: ui.deps,
        readiness,
      });
  let httpPort: number;
  let probeServer: Awaited<ReturnType<typeof startProbeServer>> | null = null;
  if (api) {
    await api.listen({ host: cfg.http.host, port: cfg.http.port });
    const addr = api.server.address();
    httpPort = typeof addr === 'object' && addr ? addr.port : cfg.http.port;
  } else {
    // A scheduler replica serves no API, but Kubernetes probes it on the HTTP port.
    probeServer = await startProbeServer({
      host: cfg.http.host,
      port: cfg.http.port,
      readiness,
      logger,
    });
    httpPort = probeServer.port;
  }
  bound.http = httpPort;
  let metricsServer: MetricsServer | null = null;
  if (cfg.metrics.port !== null) {
    metricsServer = await startMetricsServer(metrics.registry, cfg.metrics.host, cfg.metrics.port);
    bound.metrics = metricsServer.port;
  }
  if (schedules) {
    executors.warm({ agentUrl, heartbeatIntervalMs: cfg.execution.heartbeatIntervalMs });
    warmPools?.start();
    scheduler.start();
    elector?.start();
  }

  return {
    httpUrl: `http://${cfg.http.host}:${httpPort}`,
    doorUrl: runnerPlane.doorUrl,
    cellEndpointUrl: runnerPlane.cellEndpointUrl,
    metricsUrl: metricsServer ? `http://${cfg.metrics.host}:${metricsServer.port}/metrics` : null,
    keyringFile: keyringFile ?? null,
    agentUrl,
    adminTokenFile,
    isolation,
    workRoot,
    ui:
      api && ui.deps.staticDir
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
    warmPools: warmPools ?? null,
    role,
    leading: () => leadership.fence() !== null,
    readiness,
    async close() {
      draining = true;
      sshRunners?.close();
      await scheduler.stop();
      await elector?.stop();
      warmPools?.close();
      await api?.close();
      await probeServer?.close();
      await executors.close();
      tlsReloader?.stop();
      vaultReloader?.stop();
      for (const w of signingWatches) w.close();
      await rpc.close();
      await metricsServer?.close();
      await lease?.close();
      await runnerPlane.close();
      await directory.close();
      await store.close();
    },
    async drain(graceMs: number) {
      draining = true;
      const steps = (async () => {
        // Stop taking work first; releasing the lease lets another replica take over at once.
        sshRunners?.close();
        await scheduler.stop();
        await elector?.stop();
        warmPools?.close();
        // Fastify's close waits for the requests it is serving.
        await api?.close();
        await probeServer?.close();
        await executors.release();
        tlsReloader?.stop();
        vaultReloader?.stop();
        for (const w of signingWatches) w.close();
        // Agents' streams are let finish; they reconnect to another replica through the agent URL.
        await rpc.close();
        await metricsServer?.close();
        await runnerPlane.close();
        await directory.close();
        await lease?.close();
        await store.close();
      })();
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<false>((r) => (timer = setTimeout(() => r(false), graceMs)));
      const finished = await Promise.race([steps.then(() => true as const), graceOver]);
      clearTimeout(timer);
      return finished;
    },
  };
}

/** `leoflow server`'s refusals, before anything is opened or written. */
function checkProConfig(cfg: ServerConfig): void {
  if (cfg.database.kind !== 'postgres') {
    throw new ConfigError(
      'LF_CONFIG_PRO_NEEDS_POSTGRES',
      '`leoflow server` runs replicas on one PostgreSQL: pass --database-url postgres://… (or LEOFLOW_DATABASE_URL); for one process on SQLite run `leoflow standalone`',
    );
  }
  if (agentChannelMode(cfg.agent) === 'cleartext-non-loopback') {
    throw new ConfigError(
      'LF_CONFIG_AGENT_TLS_REQUIRED',
      `the agent channel listens on ${cfg.agent.host}, not loopback, without TLS: agents would receive Variables and Connections in cleartext. Give --agent-tls-cert and --agent-tls-key (LEOFLOW_AGENT_TLS_CERT / LEOFLOW_AGENT_TLS_KEY), or --agent-host 127.0.0.1`,
    );
  }
}

/**
 * The cell's side of runners (its internal endpoint for doors) and, in Lite with a door port,
 * the door itself on its own port, so nothing else ever answers under /runners/.
 */
async function startRunnerPlane(
  cfg: ServerConfig,
  directory: Directory,
  clock: Clock,
  logger: Logger,
): Promise<{
  topology: CellTopology;
  doorUrl: string | null;
  cellEndpointUrl: string | null;
  closeRunner: (runner: { id: string }) => void;
  /** live runner sessions by runner (door sessions and dialed ssh sessions alike) */
  sessions: RunnerSessions;
  /** closes this cell's sessions of tenants placed elsewhere now (moved-sessions.ts) */
  closeMovedSessions: () => Promise<number>;
  /** from now on accepted sessions run the runner protocol (until then they are refused) */
  serveSessions: (server: CellSessionServer) => void;
  close(): Promise<void>;
}> {
  const sessions = new RunnerSessions();
  const ownDoor = cfg.door.port !== null;
  // Lite's own door signs with keys in the data dir; a cell behind a separate door trusts that
  // door's public keys (its door-public.jwks.json).
  const doorKeys = ownDoor ? await loadSigningKeyring(cfg.dataDir, 'door') : null;
  const trusted =
    cfg.door.trustedKeysFile !== null ? await trustedDoorKeys(cfg.door.trustedKeysFile) : doorKeys;
  let endpoint: CellDoorEndpoint | null = null;
  let sessionServer: CellSessionServer | null = null;
  const lite = cfg.database.kind === 'sqlite';
  const topology = (): CellTopology =>
    lite && endpoint !== null
      ? { kind: 'lite', url: endpoint.url }
      : lite
        ? { kind: 'lite', url: 'http://127.0.0.1:0' }
        : { kind: 'directory' };
  if (trusted !== null && (ownDoor || cfg.door.cellPort !== null)) {
    endpoint = await startCellDoorEndpoint({
      host: ownDoor && cfg.door.cellPort === null ? '127.0.0.1' : cfg.door.cellHost,
      port: cfg.door.cellPort ?? 0,
      verifier: new DoorCredentialVerifier(trusted, clock),
      runners: directory,
      secrets: new ConnectionSecrets(clock),
      sessions,
      logger,
      serves: async (grant) => {
        const t = topology();
        if (t.kind !== 'lite' && cfg.door.cellName === null) {
          logger.error(
            'a runner session arrived but this cell has no name (--cell-name / LEOFLOW_CELL_NAME): it cannot tell which tenants are placed on it, so it refuses every session',
          );
        }
        return servesTenant(directory, t, cfg.door.cellName, grant.tenant_id);
      },
      onSession: (grant, ws) => {
        if (sessionServer) sessionServer.accept(grant, ws);
        else ws.close(1013, 'the cell is starting; reconnect');
      },
    });
  }
  const topologyNow = topology();
  let door: RunningDoor | null = null;
  if (ownDoor && cfg.door.port !== null) {
    door = await runDoor({
      dataDir: cfg.dataDir,
      directory,
      topology: topologyNow,
      host: cfg.door.host,
      port: cfg.door.port,
      bundleFile: cfg.subprocess.agentEntry,
      clock,
      logger,
    });
  }
  return {
    topology: topologyNow,
    doorUrl: cfg.door.publicUrl ?? door?.url ?? null,
    cellEndpointUrl: endpoint?.url ?? null,
    sessions,
    closeRunner: (runner) => {
      sessions.closeRunner(runner.id, SESSION_CLOSE.runnerDeleted);
      door?.door.sessions.closeRunner(runner.id, SESSION_CLOSE.runnerDeleted);
    },
    closeMovedSessions: () =>
      closeMovedSessions({
        sessions,
        directory,
        topology: topologyNow,
        cellName: cfg.door.cellName,
      }),
    serveSessions: (server) => {
      sessionServer = server;
    },
    async close() {
      await door?.close();
      await endpoint?.close();
      sessionServer?.close();
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
  try {
    // Exclusive: Pro replicas sharing a keys directory race to mint the first one; one wins.
    writeFileSync(file, `${token}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    await tokens.adopt(readFileSync(file, 'utf8').trim(), 'admin');
  }
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
