import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import {
  loadSigningKeyring,
  VerifyOnlyKeyring,
  type SigningKeyring,
  type VerificationKeyring,
} from '../auth/signing-keys.js';
import type { CellTopology } from '../runners/cell-topology.js';
import { SESSION_CLOSE } from '@leoflow/protocol';
import {
  openDirectory,
  type Directory,
  type OpenDirectoryOptions,
} from '../store/kysely-directory.js';
import { httpCellClient } from '../runners/door/cell-client.js';
import { DoorCredentialIssuer } from '../runners/door-credential.js';
import { bindNamed } from './port-binding.js';
import { createDoor, listenDoor, type Door, type DoorDirectory } from '../runners/door/door.js';

/** Where a door writes its public keys for cells to trust (`--door-keys-file` on a cell). */
export function doorPublicKeysFile(dataDir: string): string {
  return join(dataDir, 'keys', 'door-public.jwks.json');
}

/** How long a door waits for a cell (secret fetch, session handshake) before 503. */
export const DOOR_CELL_TIMEOUT_MS = 5_000;
/** How often live sessions are checked against the directory (a delete made elsewhere). */
export const DOOR_SESSION_RECHECK_MS = 5_000;

export interface RunningDoor {
  door: Door;
  url: string;
  port: number;
  keys: SigningKeyring;
  close(): Promise<void>;
}

/**
 * Loads (or creates) the door's signing keys in dataDir, writes their public half to
 * doorPublicKeysFile, and serves the door on host:port over the given directory.
 */
export async function runDoor(o: {
  dataDir: string;
  directory: DoorDirectory;
  topology: CellTopology;
  host: string;
  port: number;
  bundleFile: string | null;
  clock: Clock;
  logger: Logger;
  recheckMs?: number;
}): Promise<RunningDoor> {
  const keys = await loadSigningKeyring(o.dataDir, 'door');
  const file = doorPublicKeysFile(o.dataDir);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${JSON.stringify(keys.publicJwks(), null, 2)}\n`, { mode: 0o644 });
  const door = createDoor({
    directory: o.directory,
    topology: o.topology,
    cells: httpCellClient(new DoorCredentialIssuer(keys, o.clock), DOOR_CELL_TIMEOUT_MS),
    clock: o.clock,
    logger: o.logger,
    bundleFile: o.bundleFile,
  });
  let port: number;
  try {
    port = await listenDoor(door, o.host, o.port);
  } catch (err) {
    // nothing of a door that could not listen may keep the process alive
    await door.close();
    throw err;
  }
  const timer = setInterval(() => {
    void door.recheckSessions().catch((err: unknown) => {
      o.logger.warn(
        { why: err instanceof Error ? err.message : 'error' },
        'door session re-check failed',
      );
    });
  }, o.recheckMs ?? DOOR_SESSION_RECHECK_MS);
  timer.unref();
  return {
    door,
    url: `http://${o.host.includes(':') ? `[${o.host}]` : o.host}:${port}`,
    port,
    keys,
    async close() {
      clearInterval(timer);
      door.sessions.closeAll(SESSION_CLOSE.shuttingDown);
      await door.close();
    },
  };
}

/** A cell's trust in doors: their public keys from a door-public.jwks.json file. */
export async function trustedDoorKeys(file: string): Promise<VerificationKeyring> {
  return VerifyOnlyKeyring.fromJwks(JSON.parse(readFileSync(file, 'utf8')) as { keys: [] });
}

/** `leoflow door`: a door process of its own over the directory (Pro: its PostgreSQL schema). */
export async function startDoorProcess(o: {
  dataDir: string;
  directory: Exclude<OpenDirectoryOptions, { kind: 'shared' }>;
  host: string;
  port: number;
  bundleFile: string | null;
  clock: Clock;
  logger: Logger;
}): Promise<RunningDoor & { directory: Directory; publicKeysFile: string }> {
  const directory = await openDirectory(o.directory);
  let running: RunningDoor;
  try {
    await directory.migrate();
    running = await bindNamed({ flag: '--port', port: o.port }, () =>
      runDoor({ ...o, directory, topology: { kind: 'directory' } }),
    );
  } catch (err) {
    // all or nothing: a door that cannot serve leaves nothing open behind it
    await directory.close();
    throw err;
  }
  return {
    ...running,
    directory,
    publicKeysFile: doorPublicKeysFile(o.dataDir),
    async close() {
      await running.close();
      await directory.close();
    },
  };
}
