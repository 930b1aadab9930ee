import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import { loadSigningKeyring } from '../auth/signing-keys.js';
import type { ServerConfig } from '../config/server-config.js';
import type { CellTopology } from '../runners/cell-topology.js';
import {
  startCellDoorEndpoint,
  type CellDoorEndpoint,
} from '../runners/cells/cell-door-endpoint.js';
import type { CellSessionServer } from '../runners/cells/cell-session.js';
import { ConnectionSecrets } from '../runners/cells/connection-secrets.js';
import { closeMovedSessions } from '../runners/cells/moved-sessions.js';
import { servesTenant } from '../runners/placement.js';
import { RunnerSessions } from '../runners/runner-sessions.js';
import { SESSION_CLOSE } from '@leoflow/protocol';
import { DoorCredentialVerifier } from '../runners/door-credential.js';
import type { Directory } from '../store/kysely-directory.js';
import { runDoor, trustedDoorKeys, type RunningDoor } from './door-process.js';
import type { Lifecycle } from './lifecycle.js';
import { bindNamed } from './port-binding.js';

/**
 * The cell's side of runners (its internal endpoint for doors) and, in Lite with a door port,
 * the door itself on its own port, so nothing else ever answers under /runners/.
 */
export async function startRunnerPlane(
  cfg: ServerConfig,
  directory: Directory,
  clock: Clock,
  logger: Logger,
  life: Lifecycle,
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
    endpoint = await bindNamed({ flag: '--cell-port', port: cfg.door.cellPort ?? 0 }, () =>
      startCellDoorEndpoint({
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
          else ws.close(SESSION_CLOSE.starting.code, SESSION_CLOSE.starting.reason);
        },
      }),
    );
    const started = endpoint;
    life.add({
      name: 'cell endpoint',
      stop: async () => {
        await started.close();
        sessionServer?.close();
      },
    });
  }
  const topologyNow = topology();
  let door: RunningDoor | null = null;
  if (ownDoor && cfg.door.port !== null) {
    const doorPort = cfg.door.port;
    door = await bindNamed({ flag: '--door-port', port: doorPort }, () =>
      runDoor({
        dataDir: cfg.dataDir,
        directory,
        topology: topologyNow,
        host: cfg.door.host,
        port: doorPort,
        bundleFile: cfg.subprocess.agentEntry,
        clock,
        logger,
      }),
    );
    const running = door;
    life.add({ name: 'door', stop: () => running.close() });
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
  };
}

/** The runner plane as the later phases use it. */
export type RunnerPlane = Awaited<ReturnType<typeof startRunnerPlane>>;
