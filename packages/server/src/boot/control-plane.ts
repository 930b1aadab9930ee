import { configError, ConfigError, warmPoolPrerequisiteProblems, type Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import { type Readiness } from '../api/probes/readiness.js';

import { ADMIN_TOKEN_FILE } from '../config/data-dir-layout.js';
import type { ServerRole } from '../config/pro-config.js';
import type { ServerConfig } from '../config/server-config.js';
import type { Executor } from '../executor/executor.js';
import type { Executors } from '../executor/executors.js';

import { resolveTaskIsolation, type TaskIsolation } from '../executor/run-as-user.js';
import { resolveSandboxPlan, type SandboxPlan } from '../executor/sandbox-plan.js';

import { agentChannelMode } from '../rpc/agent-server.js';

import { CredentialMetrics } from '../rpc/credential-metrics.js';

import type { RunOperations } from '../scheduler/run-operations.js';
import type { Scheduler } from '../scheduler/scheduler.js';

import type { Store } from '../store/store.js';
import { createLogger } from '../util/logger.js';

import { systemClock } from '../util/system-clock.js';
import { faultsFromEnv, type FaultInjector } from '../util/test-faults.js';

import { loadDagsFolder } from './dags-folder.js';
import { openElection, type Election } from './election.js';

import { buildExecutors, type ExecutorSetOptions } from './executor-set.js';
import { loadKeys } from './keys.js';
import { Lifecycle } from './lifecycle.js';
import { openAgentPort } from './agent-port.js';
import { assemble } from './assemble.js';
import { listen } from './listen.js';
import { openData } from './open-data.js';
import { recordReplica, replicaInstanceId } from './replica-registry.js';

import { startRunnerPlane } from './runner-plane.js';
import type { WarmPools } from './warm-pool-wiring.js';

export { LEOFLOW_VERSION } from './version.js';
export { schedulerTimings } from './scheduler-timings.js';
export { ADMIN_TOKEN_FILE };
export { loadDagsFolder };

export interface ControlPlane {
  /** the door's base URL when this process runs one (Lite, --door-port), else null */
  doorUrl: string | null;
  /** this cell's internal endpoint for doors, when it has one */
  cellEndpointUrl: string | null;
  httpUrl: string;
  metricsUrl: string | null;
  keyringFile: string | null;
  agentUrl: string;
  /** the port the agent RPC listens on (the advertised agentUrl may name another address) */
  agentPort: number;
  adminTokenFile: string;
  /** how attempts are isolated (per-attempt uids, one shared user, or not at all) */
  isolation: TaskIsolation;
  /** the attempt sandbox in force (namespaces, the per-uid fallback, none) and what it leaves open */
  sandbox: SandboxPlan;
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
  /** the parts running, in start order (close and drain walk them in reverse) */
  parts(): string[];
  /** Lite: stops everything, running attempts included */
  close(): Promise<void>;
  /**
   * Pro's SIGTERM: /readyz turns 503, scheduling stops and the lease is released, in-flight
   * requests finish, and running agents are handed over (left running) rather than stopped.
   * Resolves true when all of it finished within graceMs, false when the grace ran out first.
   */
  drain(graceMs: number): Promise<boolean>;
}

export interface ControlPlaneOptions extends ExecutorSetOptions {
  clock?: Clock;
  logger?: Logger;
  /** test-only crash points; default: from LEOFLOW_TEST_FAULT + LEOFLOW_TEST_FAULT_ARM */
  faults?: FaultInjector;
}

/**
 * Starts everything one control-plane process runs, phase by phase in dependency order: open the
 * data, load the keys, bind the agent port (so the URL agents dial is a value from here on), elect,
 * build the executors, assemble the plane, listen, start. Each part registers on one lifecycle as
 * it starts; close() and drain() walk it in reverse. All or nothing: when any phase fails, what had
 * started is stopped again and the error (naming the flag and port, for a port) is thrown.
 */
export async function startControlPlane(
  cfg: ServerConfig,
  opts: ControlPlaneOptions = {},
): Promise<ControlPlane> {
  const clock = opts.clock ?? systemClock;
  const logger = opts.logger ?? createLogger(cfg.logLevel);
  // Refusals before anything is opened or written: a uid range that overlaps an account, Pro
  // without PostgreSQL, warm pools without their prerequisites (the CLI checked the rest).
  const isolation = resolveTaskIsolation(cfg.subprocess);
  // execution.isolation required refuses here, naming what is missing (LF_SANDBOX_REQUIRED)
  const sandbox = resolveSandboxPlan(cfg.subprocess);
  if (cfg.pro) checkProConfig(cfg);
  const warmPoolProblems = warmPoolPrerequisiteProblems(cfg.credentials);
  if (warmPoolProblems.length > 0) throw configError(warmPoolProblems);
  const life = new Lifecycle((part, err) =>
    logger.error({ err, part }, `${part} did not stop cleanly`),
  );
  try {
    return await start(cfg, opts, { clock, logger, isolation, sandbox, life });
  } catch (err) {
    await life.close();
    throw err;
  }
}

/**
 * The phases in dependency order (docs/architecture.md, "Starting"): each line hands the next
 * phase what it opened. Long on purpose (issue 32 leaves it as one of three): it reads as the
 * table of phases, and each phase's body is already its own function in boot/.
 */
async function start(
  cfg: ServerConfig,
  opts: ControlPlaneOptions,
  base: {
    clock: Clock;
    logger: Logger;
    isolation: TaskIsolation;
    sandbox: SandboxPlan;
    life: Lifecycle;
  },
): Promise<ControlPlane> {
  const { clock, logger, isolation, sandbox, life } = base;
  const faults = opts.faults ?? faultsFromEnv(process.env, logger);

  // --- open data
  const { store, directory } = await openData(cfg, clock, life);
  const runnerPlane = await startRunnerPlane(cfg, directory, clock, logger, life);

  // --- keys
  const keys = await loadKeys(cfg, store, clock, logger, life);
  const metrics = new CredentialMetrics();

  // --- the agent port: bound now, served once the plane is assembled
  const { agentPort, agentUrl } = await openAgentPort(cfg, logger, life);
  const instance = replicaInstanceId();

  // --- leadership
  const election = await openElection(cfg, logger, life, instance);
  await recordReplica(cfg, {
    store,
    logger,
    life,
    instance,
    role: election.role,
    agentUrls: agentUrl.split(','),
  });
  const { leadership, elector, schedules, role } = election;

  // --- executors
  const { executors, executor, workRoot, runnerAssignments, hostAgent, warmPools } =
    await buildExecutors(
      cfg,
      { store, clock, logger, isolation, sandbox, agentKeys: keys.agentKeys, agentUrl, leadership },
      opts,
      life,
    );

  // --- assemble
  const { parts, adminTokenFile } = await assemble(cfg, {
    store,
    directory,
    clock,
    logger,
    life,
    keys,
    metrics,
    executors,
    runnerAssignments,
    hostAgent,
    warmPools,
    leadership,
    agentUrl,
    faults,
  });
  const { runs, scheduler } = parts;

  // --- listen
  const listening = await listen(cfg, {
    store,
    directory,
    clock,
    logger,
    life,
    keys,
    metrics,
    executors,
    workRoot,
    election,
    agentPort,
    runnerPlane,
    hostAgent,
    parts,
    adminTokenFile,
  });
  const { httpPort, metricsServer } = listening;

  // --- start: what creates work, once everything it needs listens
  if (schedules) startWork(cfg, { executors, warmPools, elector, scheduler, agentUrl, life });

  return {
    httpUrl: `http://${cfg.http.host}:${httpPort}`,
    doorUrl: runnerPlane.doorUrl,
    cellEndpointUrl: runnerPlane.cellEndpointUrl,
    metricsUrl: metricsServer ? `http://${cfg.metrics.host}:${metricsServer.port}/metrics` : null,
    keyringFile: keys.vault.file ?? null,
    agentUrl,
    agentPort: agentPort.port,
    adminTokenFile,
    isolation,
    sandbox,
    workRoot,
    ui: listening.ui,
    store,
    runs,
    scheduler,
    executor,
    executors,
    warmPools,
    role,
    leading: () => leadership.fence() !== null,
    readiness: () => listening.readiness(),
    parts: () => life.names(),
    close: () => {
      listening.setDraining();
      return life.close();
    },
    async drain(graceMs: number) {
      listening.setDraining();
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<false>((r) => (timer = setTimeout(() => r(false), graceMs)));
      const finished = await Promise.race([life.drain().then(() => true as const), graceOver]);
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

/** The start phase: what creates work, once everything it needs listens. */
function startWork(
  cfg: ServerConfig,
  d: {
    executors: Executors;
    warmPools: WarmPools | null;
    elector: Election['elector'];
    scheduler: Scheduler;
    agentUrl: string;
    life: Lifecycle;
  },
): void {
  const { executors, warmPools, elector, scheduler, agentUrl, life } = d;
  executors.warm({ agentUrl, heartbeatIntervalMs: cfg.execution.heartbeatIntervalMs });
  if (warmPools) {
    warmPools.start();
    life.add({ name: 'warm pools', stop: () => warmPools.close() });
  }
  if (elector) {
    elector.start();
    // Released at once on drain, so another replica takes over without waiting for expiry.
    life.add({ name: 'scheduler lease', stop: () => elector.stop() });
  }
  scheduler.start();
  life.add({ name: 'scheduler', stop: () => scheduler.stop() });
}
