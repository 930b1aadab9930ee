import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import { checkReadiness, type Readiness } from '../api/probes/readiness.js';
import { startProbeServer } from '../api/probes/probe-server.js';
import type { ServerConfig } from '../config/server-config.js';
import type { Executors } from '../executor/executors.js';
import type { HostAgentExecutor } from '../executor/host-agent-executor.js';
import { executorPolicy } from '../executor/kubernetes/configured.js';
import type { AgentPort } from '../rpc/agent-server.js';
import type { CredentialMetrics } from '../rpc/credential-metrics.js';
import { createCellSessionServer } from '../runners/cells/cell-session.js';
import { servedTenants } from '../runners/placement.js';
import { startSshRunners } from '../runners/ssh-runner-plane.js';
import { SCHEDULER_LEASE } from '../store/ports/leader-fence.js';
import type { Directory } from '../store/kysely-directory.js';
import type { Store } from '../store/store.js';
import { startMetricsServer, type MetricsServer } from '../util/metrics-server.js';
import type { Election } from './election.js';
import type { Keys } from './keys.js';
import type { Lifecycle } from './lifecycle.js';
import type { PlaneParts } from './plane-assembly.js';
import { bindNamed } from './port-binding.js';
import { buildRestApi } from './rest-api.js';
import type { RunnerPlane } from './runner-plane.js';
import { uiForControlPlane } from './web-app-setup.js';
import { LEOFLOW_VERSION } from './version.js';

export interface ListenInputs {
  store: Store;
  directory: Directory;
  clock: Clock;
  logger: Logger;
  life: Lifecycle;
  keys: Keys;
  metrics: CredentialMetrics;
  executors: Executors;
  workRoot: string;
  election: Election;
  agentPort: AgentPort;
  runnerPlane: RunnerPlane;
  hostAgent: HostAgentExecutor | null;
  parts: PlaneParts;
  adminTokenFile: string;
}

export interface Listening {
  httpPort: number;
  metricsServer: MetricsServer | null;
  readiness(): Promise<Readiness>;
  ui: { url: string; signInUrl: string | null } | null;
  /** /readyz answers 503 from now on (close and drain) */
  setDraining(): void;
}

/**
 * Phase 6: the agent service behind the bound agent port and runner sessions, the ssh runners,
 * the REST API (or a scheduler replica's probes) and the metrics listener. Every port names its
 * flag when it cannot be had.
 */
export async function listen(cfg: ServerConfig, input: ListenInputs): Promise<Listening> {
  const { store, directory, clock, logger, life, keys, metrics, executors, workRoot } = input;
  const { agentPort, runnerPlane, parts, adminTokenFile } = input;
  const { leadership, schedules, serves } = input.election;
  const { vault, runs, verifier } = parts;
  const sshRunners = await serveAgents(cfg, input);

  let draining = false;
  const leases = input.election.leases;
  const readiness = () =>
    checkReadiness({
      migrationStatus: () => store.migrationStatus(),
      leaseHolder: leases ? () => leases.current(SCHEDULER_LEASE) : null,
      leading: () => leadership.fence() !== null,
      leaderGates: schedules && cfg.pro !== undefined,
      takeoverMs: cfg.pro ? cfg.pro.lease.ttlMs + cfg.pro.lease.renewIntervalMs : 0,
      draining: () => draining,
      partsNotRunning: () => life.notRunning(),
    });
  // Doctor reports the ports this process really bound.
  const bound = { http: cfg.http.port, agent: agentPort.port, metrics: cfg.metrics.port };
  const ui = uiForControlPlane(cfg, clock, process.env, store);
  let httpPort: number;
  if (serves) {
    const api = buildRestApi({
      store,
      vault,
      runs,
      clock,
      logger,
      tokens: keys.apiTokens,
      userKeys: keys.userKeys,
      revocation: {
        executors,
        evictAttempt: (ti, t) => verifier.evictAttempt(ti, t),
        livenessMode: cfg.credentials.secretLivenessMode,
        tokenTtlMs: keys.agentTokenTtlSeconds * 1000,
      },
      vaultKeyring: {
        dataDir: cfg.dataDir,
        source: keys.vault.source,
        file: keys.vault.file ?? null,
      },
      doctorConfig: () => ({
        ...cfg,
        subprocess: { ...cfg.subprocess, workDir: workRoot },
        http: { ...cfg.http, port: bound.http },
        agent: { ...cfg.agent, port: bound.agent },
        metrics: { ...cfg.metrics, port: bound.metrics },
      }),
      platformTenantId: cfg.tenantId,
      executorPolicy: executorPolicy(executors.names(), cfg.kubernetes),
      pausedAtCreation: cfg.dagsPausedAtCreation,
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
    // Fastify's close waits for the requests it is serving.
    life.add({ name: 'REST API', stop: () => api.close() });
    await bindNamed({ flag: '--http-port', port: cfg.http.port }, () =>
      api.listen({ host: cfg.http.host, port: cfg.http.port }),
    );
    const addr = api.server.address();
    httpPort = typeof addr === 'object' && addr ? addr.port : cfg.http.port;
  } else {
    // A scheduler replica serves no API, but Kubernetes probes it on the HTTP port.
    const probes = await bindNamed({ flag: '--http-port', port: cfg.http.port }, () =>
      startProbeServer({ host: cfg.http.host, port: cfg.http.port, readiness, logger }),
    );
    life.add({ name: 'probes', stop: () => probes.close() });
    httpPort = probes.port;
  }
  bound.http = httpPort;
  const metricsServer = await listenMetrics(cfg, metrics, logger);
  if (metricsServer) {
    life.add({ name: 'metrics', stop: () => metricsServer.close() });
    bound.metrics = metricsServer.port;
  }
  return {
    httpPort,
    metricsServer,
    readiness,
    ui:
      serves && ui.deps.staticDir
        ? {
            url: `http://${cfg.http.host}:${httpPort}/`,
            signInUrl: ui.signInUrl(`http://${cfg.http.host}:${httpPort}`, adminTokenFile),
          }
        : null,
    setDraining: () => {
      draining = true;
    },
  };
}

/**
 * The agent service behind the agent port, the door's runner sessions and Lite's host agent
 * socket (one gate for all three), and the ssh runners of this cell on the scheduling replica.
 */
async function serveAgents(cfg: ServerConfig, input: ListenInputs) {
  const { store, directory, logger, life, agentPort, runnerPlane, parts } = input;
  agentPort.serve({
    impl: parts.agentService,
    auth: parts.agentAuth,
    onInternalError: (err) => logger.error({ err }, 'agent RPC failed'),
  });
  // Door sessions speak the agent service behind the same gate as the agent port.
  const cellSessions = createCellSessionServer({
    impl: parts.agentService,
    auth: parts.agentAuth,
    onInternalError: (err) => logger.error({ err }, 'agent RPC failed (runner session)'),
  });
  runnerPlane.serveSessions(cellSessions);
  // Lite's host agent speaks the same protocol on its socket, as a runner of this process.
  input.hostAgent?.serveOn((who, stream) => cellSessions.serve(who, stream));
  const sshRunners = input.election.schedules
    ? await sshRunnersOfThisCell(cfg, {
        store,
        directory,
        logger,
        leadership: input.election.leadership,
        vault: parts.vault,
        runnerPlane,
        cellSessions,
      })
    : null;
  if (sshRunners) life.add({ name: 'ssh runners', stop: () => sshRunners.close() });
  return sshRunners;
}

/**
 * The metrics listener. A port the operator gave is never replaced; when Lite's default port is
 * taken (a second installation on the host) and the operator did not choose one, a free port is
 * taken instead and logged.
 */
async function listenMetrics(cfg: ServerConfig, metrics: CredentialMetrics, logger: Logger) {
  const port = cfg.metrics.port;
  if (port === null) return null;
  const listen = (p: number) =>
    bindNamed({ flag: '--metrics-port', port: p }, () =>
      startMetricsServer(metrics.registry, cfg.metrics.host, p),
    );
  try {
    return await listen(port);
  } catch (err) {
    if (!cfg.metrics.freePortIfDefaultTaken || port === 0) throw err;
    if ((err as { code?: string }).code !== 'LF_PORT_UNAVAILABLE') throw err;
    const server = await listen(0);
    logger.warn(
      { default_port: port, port: server.port },
      `the default metrics port ${port} is in use (another installation?); metrics listen on ${server.port} instead (pass --metrics-port to choose)`,
    );
    return server;
  }
}

/**
 * The cell dials its ssh runners and serves the same protocol on each channel. Only the
 * scheduler leader: its broker holds the attempts (a follower's sessions would idle), and a
 * replica that loses the lease hangs up at its next refresh while the new leader dials.
 */
function sshRunnersOfThisCell(
  cfg: ServerConfig,
  d: {
    store: Store;
    directory: Directory;
    logger: Logger;
    leadership: Election['leadership'];
    vault: PlaneParts['vault'];
    runnerPlane: RunnerPlane;
    cellSessions: ReturnType<typeof createCellSessionServer>;
  },
) {
  const { store, directory, logger, leadership, vault, runnerPlane, cellSessions } = d;
  return startSshRunners({
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
}
