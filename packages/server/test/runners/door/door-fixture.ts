import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '@leoflow/core';
import { pino } from 'pino';
import { WebSocket } from 'ws';
import { loadSigningKeyring, type FileSigningKeyring } from '../../../src/auth/signing-keys.js';
import type { CellTopology } from '../../../src/runners/cell-topology.js';
import {
  startCellDoorEndpoint,
  type CellDoorEndpoint,
} from '../../../src/runners/cells/cell-door-endpoint.js';
import {
  ConnectionSecrets,
  type ConnectionGrant,
} from '../../../src/runners/cells/connection-secrets.js';
import { RunnerSessions } from '../../../src/runners/runner-sessions.js';
import { httpCellClient, type CellClient } from '../../../src/runners/door/cell-client.js';
import {
  DoorCredentialIssuer,
  DoorCredentialVerifier,
} from '../../../src/runners/door-credential.js';
import {
  createDoor,
  listenDoor,
  type Door,
  type DoorDirectory,
} from '../../../src/runners/door/door.js';
import { mintRunnerToken, runnerTokenHash } from '../../../src/runners/runner-token.js';
import { openDirectory, type Directory } from '../../../src/store/kysely-directory.js';
import { T0 } from '../../support/harness.js';

export interface Cell {
  name: string;
  endpoint: CellDoorEndpoint;
  sessions: RunnerSessions;
  secrets: ConnectionSecrets;
  /** secret fetches and session opens the door made to this cell */
  calls: { secrets: number; sessions: number };
}

/**
 * A real door on a real SQLite directory, in front of real cell endpoints (each echoing what a
 * session sends, prefixed with its name), with counters on every directory read and cell call.
 */
export interface DoorFixture {
  clock: ManualClock;
  directory: Directory;
  door: Door;
  url: string;
  logLines: string[];
  lookups: Record<string, number>;
  cells: Map<string, Cell>;
  cellClient: { fetchSecret: number; openSession: number; lastSecret: string | null };
  bundleFile: string;
  addCell(name: string, opts?: { trustDoor?: boolean }): Promise<Cell>;
  addRunner(
    tenant: string,
    name: string,
    o?: { labels?: Record<string, string>; capacity?: number },
  ): Promise<{ id: string; token: string }>;
  place(tenant: string, cell: string): Promise<void>;
  random: { value: number };
  close(): Promise<void>;
}

export async function createDoorFixture(
  opts: {
    topology?: (cells: Map<string, Cell>) => CellTopology;
    throttle?: { limit: number; windowMs: number };
    /** what a cell runs in an accepted session (default: echo, prefixed with the cell's name) */
    onSession?: (cell: string, grant: ConnectionGrant, ws: WebSocket) => void;
    /** a cell's own placement check before it accepts a session (default: every tenant) */
    serves?: (cell: string, grant: ConnectionGrant) => Promise<boolean>;
  } = {},
): Promise<DoorFixture> {
  const dir = mkdtempSync(join(tmpdir(), 'leoflow-door-'));
  const clock = new ManualClock(T0);
  const directory = await openDirectory({ kind: 'sqlite', file: join(dir, 'directory.db') });
  await directory.migrate();
  const doorKeys: FileSigningKeyring = await loadSigningKeyring(join(dir, 'door'), 'door');
  const strangerKeys = await loadSigningKeyring(join(dir, 'stranger'), 'door');
  const logLines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => void logLines.push(s) });
  const lookups: Record<string, number> = {};
  const counted = <K extends keyof DoorDirectory>(name: K): DoorDirectory[K] =>
    ((...args: unknown[]) => {
      lookups[name] = (lookups[name] ?? 0) + 1;
      return (directory[name] as (...a: unknown[]) => unknown)(...args);
    }) as DoorDirectory[K];
  const doorDirectory: DoorDirectory = {
    runnerByTokenHash: counted('runnerByTokenHash'),
    runnerById: counted('runnerById'),
    getPlacement: counted('getPlacement'),
    getCell: counted('getCell'),
  };
  const cells = new Map<string, Cell>();
  const cellByUrl = (url: string) =>
    [...cells.values()].find((c) => url.startsWith(c.endpoint.url));
  const real = httpCellClient(new DoorCredentialIssuer(doorKeys, clock), 2_000);
  const cellClient = { fetchSecret: 0, openSession: 0, lastSecret: null as string | null };
  const counting: CellClient = {
    async fetchSecret(url, runner_id) {
      cellClient.fetchSecret += 1;
      const c = cellByUrl(url);
      if (c) c.calls.secrets += 1;
      const s = await real.fetchSecret(url, runner_id);
      cellClient.lastSecret = s;
      return s;
    },
    openSession(url, secret) {
      cellClient.openSession += 1;
      const c = cellByUrl(url);
      if (c) c.calls.sessions += 1;
      return real.openSession(url, secret);
    },
  };
  const random = { value: 0 };
  const bundleFile = join(dir, 'leoflow-runner.mjs');
  writeFileSync(bundleFile, 'export const bundle = "runner";\n');
  const door = createDoor({
    directory: doorDirectory,
    topology: opts.topology ? opts.topology(cells) : { kind: 'directory' },
    cells: counting,
    clock,
    logger,
    bundleFile,
    random: () => random.value,
    ...(opts.throttle ? { throttle: opts.throttle } : {}),
  });
  const port = await listenDoor(door, '127.0.0.1', 0);

  const addCell: DoorFixture['addCell'] = async (name, o = {}) => {
    const sessions = new RunnerSessions();
    const secrets = new ConnectionSecrets(clock);
    const endpoint = await startCellDoorEndpoint({
      host: '127.0.0.1',
      port: 0,
      verifier: new DoorCredentialVerifier(o.trustDoor === false ? strangerKeys : doorKeys, clock),
      runners: directory,
      secrets,
      sessions,
      logger,
      ...(opts.serves ? { serves: (grant: ConnectionGrant) => opts.serves!(name, grant) } : {}),
      onSession: (grant, ws) => {
        if (opts.onSession) {
          opts.onSession(name, grant, ws);
          return;
        }
        ws.on('message', (data) =>
          ws.send(`${name}:${grant.runner_id}:${(data as Buffer).toString('utf8')}`),
        );
      },
    });
    const cell: Cell = { name, endpoint, sessions, secrets, calls: { secrets: 0, sessions: 0 } };
    cells.set(name, cell);
    await directory.insertCell({
      name,
      url: endpoint.url,
      state: 'active',
      created_at: clock.now(),
      updated_at: clock.now(),
    });
    return cell;
  };

  let n = 0;
  const addRunner: DoorFixture['addRunner'] = async (tenant, name, o = {}) => {
    const token = mintRunnerToken();
    const id = `rnr_${tenant}_${name}_${(n += 1)}`;
    await directory.insertRunner({
      id,
      tenant_id: tenant,
      name,
      kind: 'inbound',
      labels: o.labels ?? {},
      capacity: o.capacity ?? 1,
      ssh: null,
      token_hash: runnerTokenHash(token),
      token_cipher: new Uint8Array([1]),
      token_key_id: 'k',
      created_by: 'test',
      created_at: clock.now(),
    });
    return { id, token };
  };

  return {
    clock,
    directory,
    door,
    url: `http://127.0.0.1:${port}`,
    logLines,
    lookups,
    cells,
    cellClient,
    bundleFile,
    addCell,
    addRunner,
    place: (tenant, cell) =>
      directory.placeTenant({ tenant_id: tenant, cell, placed_by: 'test', placed_at: clock.now() }),
    random,
    async close() {
      await door.close();
      for (const c of cells.values()) await c.endpoint.close();
      await directory.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A raw GET (no fetch: it must not normalise the path) and its status, headers and body. */
export async function rawGet(
  baseUrl: string,
  path: string,
  method = 'GET',
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const { request } = await import('node:http');
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path,
        method,
        headers: { connection: 'close', ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: Object.fromEntries(
              Object.entries(res.headers).map(([k, v]) => [
                k,
                Array.isArray(v) ? v.join(',') : (v ?? ''),
              ]),
            ),
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** A WebSocket attempt at a door path: open (with the socket) or the refusal's status and body. */
export function wsAttempt(
  url: string,
): Promise<
  | { open: true; ws: WebSocket; headers: Record<string, string | string[] | undefined> }
  | { open: false; status: number; headers: Record<string, string>; body: string }
> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once('upgrade', (res) => {
      ws.once('open', () => resolve({ open: true, ws, headers: res.headers }));
    });
    ws.once('unexpected-response', (_req, res) => {
      ws.removeAllListeners('error');
      ws.on('error', () => undefined);
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        ws.terminate();
        resolve({
          open: false,
          status: res.statusCode ?? 0,
          headers: Object.fromEntries(
            Object.entries(res.headers).map(([k, v]) => [
              k,
              Array.isArray(v) ? v.join(',') : (v ?? ''),
            ]),
          ),
          body: Buffer.concat(chunks).toString('utf8'),
        });
      });
    });
    ws.once('error', reject);
  });
}

export function nextMessage(ws: WebSocket): Promise<string> {
  return new Promise((resolve) =>
    ws.once('message', (d) => resolve((d as Buffer).toString('utf8'))),
  );
}

export function closed(ws: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
}
