import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import type { WorkerTokenClaims } from '../auth/worker-token.js';
import { ADMIN_TOKEN_FILE } from '../config/data-dir-layout.js';
import type { ServerConfig } from '../config/server-config.js';
import type { AssignmentBroker } from '../executor/assignments/assignment-broker.js';
import type { Executors } from '../executor/executors.js';
import { executorPolicy } from '../executor/kubernetes/configured.js';
import { createAssignmentHandlers } from '../rpc/assignment-rpc.js';
import { agentChannelMode } from '../rpc/agent-server.js';
import type { CredentialMetrics } from '../rpc/credential-metrics.js';
import type { Leadership } from '../scheduler/leadership/leadership.js';
import type { Directory } from '../store/kysely-directory.js';
import type { Store } from '../store/store.js';
import type { FaultInjector } from '../util/test-faults.js';
import { VaultKeyringReloader } from '../vault/key-reload.js';
import { seedVault } from '../vault/vault-seed.js';
import { join } from 'node:path';
import { ensureAdminToken } from './admin-token.js';
import { HOST_AGENT_SLOTS } from './executor-set.js';
import type { HostAgentExecutor } from '../executor/host-agent-executor.js';
import { watchDagsFolder } from './dags-folder.js';
import { wireExchange } from './exchange-wiring.js';
import type { Keys } from './keys.js';
import type { Lifecycle } from './lifecycle.js';
import { assemblePlane, type PlaneParts } from './plane-assembly.js';
import type { WarmPools } from './warm-pool-wiring.js';
import { schedulerTimings } from './scheduler-timings.js';

/** What the assemble phase is built from: the parts the earlier phases opened. */
export interface AssembleInputs {
  store: Store;
  directory: Directory;
  clock: Clock;
  logger: Logger;
  life: Lifecycle;
  keys: Keys;
  metrics: CredentialMetrics;
  executors: Executors;
  runnerAssignments: AssignmentBroker;
  hostAgent: HostAgentExecutor | null;
  warmPools: WarmPools | null;
  leadership: Leadership;
  agentUrl: string;
  faults: FaultInjector;
}

/**
 * Phase 5: the plane's parts (plane-assembly.ts), the vault keyring's watch, the vault seed, the
 * first admin token and the DAG folder: everything that exists before anything listens.
 */
export async function assemble(
  cfg: ServerConfig,
  input: AssembleInputs,
): Promise<{ parts: PlaneParts; adminTokenFile: string }> {
  const { store, directory, clock, logger, life, keys, metrics, executors } = input;
  const { runnerAssignments, hostAgent, warmPools, leadership, agentUrl, faults } = input;
  const credentials = cfg.credentials;
  // Secrets travel in cleartext only over loopback; anywhere else the channel must be TLS.
  const channelMode = agentChannelMode(cfg.agent);
  if (channelMode === 'cleartext-non-loopback') {
    logger.warn(
      { host: cfg.agent.host },
      'the agent channel is cleartext on a non-loopback address: Variables and Connections will not be delivered until agent TLS is configured',
    );
  }
  // auth.agent_token_transport=exchange: boot fails closed here (no Kubernetes client, a
  // cleartext non-loopback channel, no TokenReview permission) rather than at the first pod.
  const exchange =
    credentials.agentTokenTransport === 'exchange'
      ? {
          ...(await wireExchange({
            kubernetes: cfg.kubernetes,
            channelMode,
            metrics,
            bootstrap: credentials.exchangeBootstrap,
            warmPools: credentials.warmPoolsEnabled,
          })),
          // A pod annotated with a pool's key gets a worker token, once, if the pool made it.
          ...(warmPools ? { workerBootstrap: warmPools.manager } : {}),
        }
      : undefined;
  // Created once the vault exists; a value under an unknown key id asks it for one reload.
  let vaultReloader: VaultKeyringReloader | null = null;
  const parts = assemblePlane({
    onVaultUnknownKey: async (ids) => {
      await vaultReloader?.onUnknownKey(ids);
    },
    store,
    clock,
    logger,
    agentKeys: keys.agentKeys,
    agentTokenTtlSeconds: keys.agentTokenTtlSeconds,
    vaultKeyring: keys.vault.keyring,
    // runner tokens are sealed by this keyring too: rotation must re-encrypt them
    runnerTokens: directory,
    onVaultUnreadable: (v) =>
      logger.error(
        { kind: v.kind, tenant_id: v.tenant_id, id: v.id, key_id: v.key_id, code: v.code },
        'a stored secret cannot be decrypted; it is not delivered',
      ),
    executors,
    agentUrl,
    timings: schedulerTimings(cfg.execution),
    credentials: {
      scoping: credentials.secretScoping,
      liveness: credentials.secretLivenessMode,
      maxCredentialLifetimeMs: credentials.maxAttemptCredentialLifetimeSeconds * 1000,
    },
    channelSecure: channelMode !== 'cleartext-non-loopback',
    channelMode,
    ...(exchange ? { exchange } : {}),
    metrics,
    logLimits: cfg.logs,
    faults,
    leadership,
    assignments: createAssignmentHandlers({
      broker: runnerAssignments,
      runnerById: async (id) => {
        const r = await directory.runnerById(id);
        return r && (await directory.getRunner(r.tenant_id, r.name));
      },
      store,
      clock,
      ...(hostAgent
        ? {
            host: {
              runnerId: hostAgent.session.runner_id,
              broker: hostAgent.broker,
              slots: HOST_AGENT_SLOTS,
            },
          }
        : {}),
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
  vaultReloader = watchVaultKeyring(parts.vault, keys, clock, logger, life);
  if (cfg.vaultSeedDir)
    await seedVault(parts.vault, cfg.tenantId, cfg.vaultSeedDir, clock.now(), logger);
  const adminTokenFile = join(keys.keysDir, ADMIN_TOKEN_FILE);
  await ensureAdminToken(adminTokenFile, keys.apiTokens, cfg.tenantId, logger);
  if (cfg.dagsFolder) {
    const watcher = await watchDagsFolder(cfg.dagsFolder, store, cfg.tenantId, clock, logger, {
      policy: executorPolicy(executors.names(), cfg.kubernetes),
      pausedAtCreation: cfg.dagsPausedAtCreation,
      pollMs: cfg.dagsFolderPollMs,
      onChange: () => parts.poke(),
    });
    life.add({ name: 'DAGs folder watch', stop: () => watcher.stop() });
  }
  return { parts, adminTokenFile };
}

/**
 * Rotations by another process (a replica, the CLI) reach this one without a restart: the vault
 * keyring file is watched (an environment key has nothing to watch).
 */
function watchVaultKeyring(
  vault: PlaneParts['vault'],
  keys: Keys,
  clock: Clock,
  logger: Logger,
  life: Lifecycle,
): VaultKeyringReloader | null {
  if (keys.vault.source === 'env' || keys.vault.file === undefined) return null;
  const watchedFile = keys.vault.file;
  const reloader = new VaultKeyringReloader({
    vault,
    load: keys.reloadVaultKeyring,
    clock,
    onError: (err) => logger.error({ code: err.code, file: watchedFile }, err.message),
    onApplied: (c) => logger.info({ ...c, file: watchedFile }, 'vault keyring reloaded'),
  });
  reloader.watch(watchedFile);
  life.add({ name: 'vault keyring watch', stop: () => reloader.stop() });
  return reloader;
}
