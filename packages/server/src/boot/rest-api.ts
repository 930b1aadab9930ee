import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import { buildApi, type ApiDeps } from '../api/app.js';
import type { ApiTokens } from '../auth/api-tokens.js';
import type { FileSigningKeyring } from '../auth/signing-keys.js';
import type { ServerConfig } from '../config/server-config.js';
import { rotateVaultKey } from '../vault/key-rotation.js';
import type { ExecutorPolicy } from '../executor/executor-policy.js';
import { revokeAttemptCredential, type RevocationDeps } from '../attempts/revocation.js';
import { buildDoctorReport, liveDoctorStore, nodeDoctorDeps } from '../doctor/index.js';
import type { RunOperations } from '../scheduler/run-operations.js';
import type { Store } from '../store/store.js';
import type { KeyringSource } from '../vault/load-keyring.js';
import type { VaultService } from '../vault/vault-service.js';
import { CellAdmin } from '../runners/cells/cell-admin.js';
import { type CellTopology } from '../runners/cell-topology.js';
import { RunnerRegistry } from '../runners/runner-registry.js';
import type { Directory } from '../store/kysely-directory.js';
import { PlatformAdmin } from '../api/tenancy/platform.js';
import { TenantScopes } from '../api/tenancy/tenant-scope.js';

export interface RestApiDeps {
  store: Store;
  vault: VaultService;
  runs: RunOperations;
  clock: Clock;
  logger: Logger;
  tokens: ApiTokens;
  userKeys: FileSigningKeyring;
  /** the executor and the token-cache eviction a revocation needs */
  revocation: Pick<RevocationDeps, 'executors' | 'evictAttempt' | 'livenessMode' | 'tokenTtlMs'>;
  vaultKeyring: { dataDir: string; source: KeyringSource; file: string | null };
  /** the configuration doctor reports, read when asked (bound ports are known only later) */
  doctorConfig: () => ServerConfig;
  platformTenantId: string;
  /** runners, cells and placements (Lite: the same SQLite file; Pro: its own schema) */
  directory: Directory;
  cellTopology: CellTopology;
  /** the door's public base URL, for launch commands; null when none is configured */
  doorUrl: string | null;
  /** a runner was deleted: close its live sessions */
  onRunnerDeleted?: (runner: { id: string; tenant_id: string }) => void;
  /** a runner was registered (an ssh runner is dialed at once) */
  onRunnerRegistered?: (runner: { id: string; tenant_id: string; kind: 'inbound' | 'ssh' }) => void;
  /** a placement changed or a cell was drained: close this cell's sessions of moved tenants */
  onPlacementChanged?: () => Promise<number>;
  /** what DAG registration checks tasks' executor choices against */
  executorPolicy?: ExecutorPolicy;
  /** dags.paused_at_creation: a DAG pushed for the first time starts paused */
  pausedAtCreation?: boolean;
  version: string;
  onChange: () => void;
  onReply?: ApiDeps['onReply'];
  timeouts?: ApiDeps['timeouts'];
  ui?: ApiDeps['ui'];
  readiness?: ApiDeps['readiness'];
}

/**
 * The REST API with everything behind it: tenant scopes for request handlers, the platform
 * operations behind platform permissions, and the routes. One assembly for the control plane
 * and for the tests that drive the real API.
 */
export function buildRestApi(d: RestApiDeps): ReturnType<typeof buildApi> {
  const { store, vault, clock } = d;
  const scopes = new TenantScopes({
    store,
    vault,
    runs: d.runs,
    clock,
    revoke: (request) => revokeAttemptCredential({ store, clock, ...d.revocation }, request),
    ...(d.executorPolicy ? { executorPolicy: d.executorPolicy } : {}),
    ...(d.pausedAtCreation !== undefined ? { pausedAtCreation: d.pausedAtCreation } : {}),
  });
  const platform = new PlatformAdmin({
    store,
    tokens: d.tokens,
    clock,
    rotateVaultKey: async (opts) => ({
      ...(await rotateVaultKey(
        {
          vault,
          dataDir: d.vaultKeyring.dataDir,
          keyringSource: d.vaultKeyring.source,
          keyringFile: d.vaultKeyring.file,
        },
        opts,
      )),
    }),
    rotateUserSigningKey: async () => {
      const kid = await d.userKeys.rotate(clock.now());
      return { kid, keys: d.userKeys.describe().map((k) => ({ kid: k.kid, signing: k.signing })) };
    },
    // Asked of this process: the store it holds open, not a second connection.
    doctor: () =>
      buildDoctorReport(d.doctorConfig(), {
        ...nodeDoctorDeps(),
        openStore: () => Promise.resolve(liveDoctorStore(store)),
      }),
  });
  const runners = new RunnerRegistry({
    runners: d.directory,
    vault,
    connectionExists: async (tenant_id, conn_id) =>
      (await store.existingConnectionIds(tenant_id, [conn_id])).has(conn_id),
    clock,
    doorUrl: d.doorUrl,
    ...(d.onRunnerDeleted ? { onDeleted: d.onRunnerDeleted } : {}),
    ...(d.onRunnerRegistered ? { onRegistered: d.onRunnerRegistered } : {}),
  });
  const cells = new CellAdmin({
    cells: d.directory,
    clock,
    topology: d.cellTopology,
    ...(d.onPlacementChanged ? { onPlacementChanged: d.onPlacementChanged } : {}),
  });
  return buildApi({
    scopes,
    directory: { runners, cells },
    tokens: d.tokens,
    platform,
    platformTenantId: d.platformTenantId,
    clock,
    logger: d.logger,
    version: d.version,
    onChange: d.onChange,
    ...(d.onReply ? { onReply: d.onReply } : {}),
    ...(d.timeouts ? { timeouts: d.timeouts } : {}),
    ...(d.ui ? { ui: d.ui } : {}),
    ...(d.readiness ? { readiness: d.readiness } : {}),
  });
}
