import { LeoflowError, type Clock } from '@leoflow/core';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { SigningKeyring } from '../auth/signing-keys.js';
import type { ServerConfig } from '../config/server-config.js';
import { AssignmentBroker } from '../executor/assignments/assignment-broker.js';
import { requeueFence } from '../executor/assignments/requeue-fence.js';
import type { Executor } from '../executor/executor.js';
import { Executors } from '../executor/executors.js';
import { createKubernetesExecutor } from '../executor/kubernetes/configured.js';
import type { TaskIsolation } from '../executor/run-as-user.js';
import { sandboxAgentEnv, type SandboxPlan } from '../executor/sandbox-plan.js';
import { RunnerExecutor } from '../executor/runner-executor.js';
import { HostAgentExecutor } from '../executor/host-agent-executor.js';
import { SubprocessExecutor } from '../executor/subprocess-executor.js';
import {
  ensureInstallId,
  ensureWorkRoot,
  installTaskPythonSdk,
  installTaskSdk,
  workRootFor,
} from '../executor/work-root.js';
import type { Leadership } from '../scheduler/leadership/leadership.js';
import type { Store } from '../store/store.js';
import type { Lifecycle } from './lifecycle.js';
import { wireWarmPools, type WarmPoolWiringInput, type WarmPools } from './warm-pool-wiring.js';

/**
 * Attempts one host agent runs at once. The scheduler's own limits (max_active_tasks,
 * max_active_runs) decide how many are dispatched; this only bounds one process.
 */
export const HOST_AGENT_SLOTS = 256;

export interface ExecutorSetOptions {
  /** a test's own executor stands in for its kind */
  executor?: Executor;
  /** wraps the default executor before anything uses it (the executor contract suite) */
  decorateExecutor?: (executor: Executor) => Executor;
  /** tests: a short worker token TTL and a fast renewal check */
  warmPools?: Pick<WarmPoolWiringInput, 'workerTokenTtlSeconds' | 'renewCheckMs'>;
}

export interface ExecutorSet {
  executors: Executors;
  /** the default executor (the only one Lite configures) */
  executor: Executor;
  /** this installation's work root (/tmp/leoflow-work-<install id> by default) */
  workRoot: string;
  /** attempts for runners wait here until a runner session takes them (executor: runner) */
  runnerAssignments: AssignmentBroker;
  /** Lite's host agent (execution.host_agent on), serving local attempts in place of one agent each */
  hostAgent: HostAgentExecutor | null;
  warmPools: WarmPools | null;
}

/** Phase 4: the work root, the task SDK copy, and every configured executor by name. */
export async function buildExecutors(
  cfg: ServerConfig,
  deps: {
    store: Store;
    clock: Clock;
    logger: Logger;
    isolation: TaskIsolation;
    /** the attempt sandbox boot decided (executor/sandbox-plan.ts) */
    sandbox: SandboxPlan;
    agentKeys: SigningKeyring;
    /** the URL agents dial (the agent port is already bound) */
    agentUrl: string;
    leadership: Leadership;
  },
  opts: ExecutorSetOptions,
  life: Lifecycle,
): Promise<ExecutorSet> {
  const { store, clock, logger } = deps;
  const { installId, workRoot, taskNodeModules, taskPythonPath } = prepareWorkRoot(cfg, logger);
  const runnerAssignments = new AssignmentBroker(clock, {
    onMintError: (err) => logger.error({ err }, 'minting an assigned attempt token failed'),
    // A requeued assignment's token dies: the row moves to the next dispatch generation.
    refence: requeueFence(store, clock),
    onRefenceError: (err) => logger.error({ err }, 'fencing a requeued assignment failed'),
  });
  const built = new Map<string, Executor>();
  if (opts.executor) built.set(opts.executor.name, opts.executor);
  // tasks never see the data dir, the keys or /run/leoflow (the uid claims)
  const sandboxEnv = sandboxAgentEnv(
    deps.sandbox,
    [
      cfg.dataDir,
      ...(cfg.pro?.keysDir && cfg.pro.keysDir !== cfg.dataDir ? [cfg.pro.keysDir] : []),
    ],
    installId,
  );
  let hostAgent: HostAgentExecutor | null = null;
  if (!built.has('subprocess')) {
    const local = localExecutor(cfg, deps, {
      workRoot,
      sandboxEnv,
      taskNodeModules,
      taskPythonPath,
    });
    built.set('subprocess', local);
    if (local instanceof HostAgentExecutor) hostAgent = local;
  }
  if (!built.has('runner')) {
    built.set(
      'runner',
      new RunnerExecutor({
        broker: runnerAssignments,
        store,
        onError: (err) => logger.error({ err }, 'runner attempt reconcile failed'),
      }),
    );
  }
  const warmPools = await buildWarmPools(cfg, deps, opts);
  if (cfg.kubernetes && !built.has('kubernetes')) {
    const credentials = cfg.credentials;
    const cold = await createKubernetesExecutor(
      cfg.kubernetes,
      store,
      logger,
      credentials.agentTokenTransport,
      credentials.exchangeBootstrap,
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
  life.add({
    name: 'executors',
    // Lite stops its attempts; a draining Pro replica leaves its agents running for the others.
    stop: () => executors.close(),
    release: () => executors.release(),
  });
  return { executors, executor, workRoot, runnerAssignments, hostAgent, warmPools };
}

/**
 * execution.warm_pools_enabled with pools configured (refused at boot without the exchange
 * transport and liveness=enforce): pool pods, the worker stream, warm routing.
 */
async function buildWarmPools(
  cfg: ServerConfig,
  deps: {
    store: Store;
    clock: Clock;
    logger: Logger;
    agentKeys: SigningKeyring;
    agentUrl: string;
    leadership: Leadership;
  },
  opts: ExecutorSetOptions,
): Promise<WarmPools | null> {
  const pools = cfg.kubernetes?.warmPools;
  if (!cfg.credentials.warmPoolsEnabled || !cfg.kubernetes || !pools?.length) return null;
  for (const pool of pools) {
    const defaults = cfg.kubernetes.tenants[pool.tenant]?.defaultResources;
    if (Object.keys(defaults?.requests ?? {}).length + Object.keys(defaults?.limits ?? {}).length) {
      // Warm routing sends an attempt with resources to a cold pod (a pool pod carries none), and
      // a tenant's defaults give every attempt resources: this pool's pods would idle for good.
      deps.logger.warn(
        { code: 'LF_WARM_POOL_UNUSED', tenant: pool.tenant, pool: pool.image },
        `LF_WARM_POOL_UNUSED: tenant ${pool.tenant} sets default_resources, so none of its attempts runs warm and this pool's pods stay idle; remove the tenant's default_resources or the pool`,
      );
    }
  }
  return wireWarmPools({
    kubernetes: { ...cfg.kubernetes, warmPools: pools },
    agentKeys: deps.agentKeys,
    clock: deps.clock,
    store: deps.store,
    logger: deps.logger,
    agentUrl: deps.agentUrl,
    heartbeatIntervalMs: cfg.execution.heartbeatIntervalMs,
    refence: requeueFence(deps.store, deps.clock),
    leading: () => deps.leadership.fence() !== null,
    ...(opts.warmPools ?? {}),
  });
}

/** This installation's work root, and the SDK copies in it that node and python tasks import. */
function prepareWorkRoot(
  cfg: ServerConfig,
  logger: Logger,
): {
  installId: string;
  workRoot: string;
  taskNodeModules: string | null;
  taskPythonPath: string | null;
} {
  const installId = ensureInstallId(cfg.dataDir);
  const workRoot = cfg.subprocess.workDir ?? workRootFor(installId);
  ensureWorkRoot(workRoot);
  let taskNodeModules = cfg.subprocess.taskNodeModules;
  if (cfg.subprocess.sdkBundle !== null) {
    taskNodeModules = installTaskSdk(workRoot, cfg.subprocess.sdkBundle);
  } else {
    logger.warn(
      'no @leoflow/sdk bundle (packages/sdk/dist/leoflow-sdk.mjs): node tasks import it from the installation, which task uids cannot reach when it sits in a 0700 directory; run `npm run build`',
    );
  }
  const taskPythonPath =
    cfg.subprocess.pythonSdk !== null
      ? installTaskPythonSdk(workRoot, cfg.subprocess.pythonSdk)
      : null;
  return { installId, workRoot, taskNodeModules, taskPythonPath };
}

/** Lite's local executor: the host agent when execution.host_agent is on, else one agent per attempt. */
function localExecutor(
  cfg: ServerConfig,
  deps: {
    store: Store;
    clock: Clock;
    logger: Logger;
    isolation: TaskIsolation;
    sandbox: SandboxPlan;
  },
  at: {
    workRoot: string;
    sandboxEnv: Record<string, string>;
    taskNodeModules: string | null;
    taskPythonPath: string | null;
  },
): Executor {
  const { store, clock, logger } = deps;
  const { workRoot, sandboxEnv, taskNodeModules, taskPythonPath } = at;
  if (cfg.subprocess.hostAgent) {
    if (deps.isolation.mode === 'shared') {
      throw new LeoflowError(
        'LF_CONFIG_INVALID',
        'execution.host_agent on runs every attempt under a uid of its own: it does not run tasks as one shared execution.run_as_user; set --attempt-uid-range (the default range) or --host-agent off',
      );
    }
    return new HostAgentExecutor({
      agentEntry: cfg.subprocess.agentEntry,
      workDir: workRoot,
      dataDir: cfg.dataDir,
      isolation: deps.isolation,
      sandbox: { env: sandboxEnv },
      taskNodeModules,
      taskPythonPath,
      slots: HOST_AGENT_SLOTS,
      broker: new AssignmentBroker(clock, {
        onMintError: (err) => logger.error({ err }, 'minting a host agent attempt token failed'),
        refence: requeueFence(store, clock),
        onRefenceError: (err) => logger.error({ err }, 'fencing a requeued host attempt failed'),
      }),
      store,
      tenantId: cfg.tenantId,
      logger,
    });
  }
  return new SubprocessExecutor({
    agentEntry: cfg.subprocess.agentEntry,
    workDir: workRoot,
    diagnosticsDir: join(cfg.dataDir, 'agents'),
    isolation: deps.isolation,
    sandbox: { env: sandboxEnv, helper: deps.sandbox.helper },
    keepWorkDirs: cfg.subprocess.keepWorkDirs,
    agentCaFile: cfg.agent.tls?.caFile ?? null,
    taskNodeModules,
    taskPythonPath,
    standbyAgents: cfg.subprocess.standbyAgents,
    logger,
  });
}
