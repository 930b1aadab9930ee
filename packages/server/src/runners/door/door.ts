import { createReadStream, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import { Counter, Registry } from 'prom-client';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { CellTopology } from '../cell-topology.js';
import { MAX_SESSION_FRAME_BYTES } from '@leoflow/protocol';
import { currentCell, type ResolvedCell } from '../placement.js';
import { RunnerSessions } from '../runner-sessions.js';
import { SESSION_CLOSE } from '@leoflow/protocol';
import type { RunnerIdentity } from '../../store/directory-types.js';
import type { CellStore } from '../../store/ports/cells.js';
import type { RunnerStore } from '../../store/ports/runners.js';
import { isRunnerTokenShape, redactRunnerPath, runnerTokenHash } from '../runner-token.js';
import { CellCallError, type CellClient } from './cell-client.js';
import {
  cellRefused,
  cellUnreachable,
  NO_BUNDLE,
  NOT_FOUND,
  notPlaced,
  READY,
  sendReply,
  sendReplyOnSocket,
  UNAUTHORIZED,
  type DoorReply,
} from './door-replies.js';
import { UnauthorizedThrottle, type ThrottleLimits } from './door-throttle.js';

/** The directory reads the door makes; nothing else, and never a write. */
export type DoorDirectory = Pick<RunnerStore, 'runnerByTokenHash' | 'runnerById'> &
  Pick<CellStore, 'getPlacement' | 'getCell'>;

export interface DoorOptions {
  directory: DoorDirectory;
  topology: CellTopology;
  cells: CellClient;
  clock: Clock;
  logger: Logger;
  /** the runner bundle the `bundle` path serves; null: none */
  bundleFile: string | null;
  /** [0,1): the jitter of Retry-After (tests pin it) */
  random?: () => number;
  throttle?: ThrottleLimits;
  /** Retry-After base, seconds; the header is base + up to base more */
  retryAfterSeconds?: number;
}

type DoorAction = 'login' | 'session' | 'bundle';
// Exactly three paths; the token segment is anything but a slash (checked by shape, then hash).
const DOOR_PATH = /^\/runners\/([^/?#]+)\/(login|session|bundle)$/;

export interface Door {
  readonly server: Server;
  readonly sessions: RunnerSessions;
  readonly metrics: Registry;
  /** closes live sessions whose runner no longer exists; returns how many runners it closed */
  recheckSessions(): Promise<number>;
  close(): Promise<void>;
}

/**
 * The door: the one public URL inbound runners reach their tenant's current cell through.
 * Checks, in order: (a) path and method, 404 before any lookup; (b) token → runner by hash,
 * one 401 for every failure; (c) runner → tenant → current cell, 503 with a jittered
 * Retry-After; (d) only then the cell: a fresh per-connection secret on every session attempt,
 * injected upstream, the token stripped. No 401 ever comes from a cell fault.
 */
export function createDoor(o: DoorOptions): Door {
  const log = o.logger.child({ component: 'door' });
  const random = o.random ?? Math.random;
  const throttle = new UnauthorizedThrottle(o.clock, o.throttle);
  const sessions = new RunnerSessions();
  const base = o.retryAfterSeconds ?? 5;
  const retryAfter = () => base + Math.floor(random() * (base + 1));
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_SESSION_FRAME_BYTES,
    perMessageDeflate: false,
  });
  const metrics = new Registry();
  // Labels are the path kind and the status: never a token, runner, tenant or cell.
  const requests = new Counter({
    name: 'leoflow_door_requests_total',
    help: 'door requests by path kind and answer',
    labelNames: ['path', 'status'],
    registers: [metrics],
  });

  const c: DoorContext = { o, log, throttle, sessions, wss, requests, retryAfter };

  const server = createServer((req, res) => {
    void onRequest(c, req, res).catch((err: unknown) =>
      failed(err, () => sendReply(res, cellUnreachable(retryAfter()))),
    );
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    void onUpgrade(c, req, socket, head).catch((err: unknown) =>
      failed(err, () => sendReplyOnSocket(socket, cellUnreachable(retryAfter()))),
    );
  });

  /** A directory outage is an infrastructure fault: 503 with Retry-After, never 401. */
  const failed = (err: unknown, answer: () => void) => {
    log.error({ why: err instanceof Error ? err.message : 'error' }, 'door request failed');
    try {
      answer();
    } catch {
      // the connection is gone already
    }
  };

  return {
    server,
    sessions,
    metrics,
    async recheckSessions() {
      let closed = 0;
      for (const id of sessions.runnerIds()) {
        const still = await o.directory.runnerById(id);
        if (!still) closed += sessions.closeRunner(id, SESSION_CLOSE.runnerDeleted) > 0 ? 1 : 0;
      }
      return closed;
    },
    async close() {
      sessions.closeAll(SESSION_CLOSE.shuttingDown);
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}

/** Close codes a peer may not send (1005, 1006, 1015) become 1000 or 1011 on the other side. */
function sendable(code: number): number {
  if (code === 1005) return 1000;
  if (code === 1006 || code === 1015) return 1011;
  return code;
}

function closePair(client: WebSocket, upstream: WebSocket) {
  return {
    close(code: number, reason: string) {
      client.close(code, reason);
      upstream.close(code === SESSION_CLOSE.runnerDeleted.code ? 1000 : code, reason);
    },
  };
}

/** Frames both ways, unchanged; either side closing closes the other with its code. */
function relay(client: WebSocket, upstream: WebSocket, remove: () => void): void {
  const forward = (to: WebSocket) => (data: RawData, isBinary: boolean) => {
    if (to.readyState === to.OPEN) to.send(data, { binary: isBinary });
  };
  client.on('message', forward(upstream));
  upstream.on('message', forward(client));
  let done = false;
  const finish = (other: WebSocket) => (code: number, reason: Buffer) => {
    if (!done) {
      done = true;
      remove();
    }
    if (other.readyState === other.OPEN || other.readyState === other.CONNECTING) {
      other.close(sendable(code), reason.toString('utf8').slice(0, 120));
    }
  };
  client.on('close', finish(upstream));
  upstream.on('close', finish(client));
  client.on('error', () => client.terminate());
  upstream.on('error', () => upstream.terminate());
}

/** Listens on host:port; resolves with the bound port. */
export async function listenDoor(door: Door, host: string, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    door.server.once('error', reject);
    door.server.listen(port, host, () => resolve());
  });
  const addr = door.server.address();
  return typeof addr === 'object' && addr ? addr.port : port;
}

/** What the door's request handlers share: its options, log, throttle, sessions and metrics. */
interface DoorContext {
  o: DoorOptions;
  log: Logger;
  throttle: UnauthorizedThrottle;
  sessions: RunnerSessions;
  wss: WebSocketServer;
  requests: Counter;
  retryAfter: () => number;
}

/** (a) The door's grammar: `GET /runners/<token>/<action>`, or nothing. */
function match(req: IncomingMessage): { token: string; action: DoorAction } | undefined {
  if (req.method !== 'GET') return undefined;
  const m = DOOR_PATH.exec(req.url ?? '');
  if (!m) return undefined;
  return { token: m[1] ?? '', action: m[2] as DoorAction };
}

function record(c: DoorContext, req: IncomingMessage, action: string, r: { status: number }) {
  c.requests.inc({ path: action, status: String(r.status) });
  c.log.info(
    { method: req.method, path: redactRunnerPath(req.url ?? ''), status: r.status },
    'door request',
  );
}

/** (b) and (c): a runner and its cell, or the reply that ends the request. */
async function resolve(
  c: DoorContext,
  token: string,
  source: string,
): Promise<{ runner: RunnerIdentity; cell: ResolvedCell } | DoorReply> {
  if (c.throttle.isThrottled(source)) return UNAUTHORIZED;
  const runner = isRunnerTokenShape(token)
    ? await c.o.directory.runnerByTokenHash(runnerTokenHash(token))
    : undefined;
  if (!runner || runner.kind !== 'inbound') {
    c.throttle.noteUnauthorized(source);
    return UNAUTHORIZED;
  }
  const cell = await currentCell(c.o.directory, c.o.topology, runner.tenant_id);
  if (!cell) return notPlaced(c.retryAfter());
  return { runner, cell };
}

function sourceOf(req: IncomingMessage) {
  return req.socket.remoteAddress ?? 'unknown';
}

async function onRequest(c: DoorContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const m = match(req);
  // A session is an upgrade or nothing: a plain GET on it is outside the grammar.
  if (!m || m.action === 'session') {
    record(c, req, 'other', NOT_FOUND);
    sendReply(res, NOT_FOUND);
    return;
  }
  const resolved = await resolve(c, m.token, sourceOf(req));
  if ('status' in resolved) {
    record(c, req, m.action, resolved);
    sendReply(res, resolved);
    return;
  }
  if (m.action === 'login') {
    record(c, req, m.action, READY);
    sendReply(res, READY);
    return;
  }
  serveBundle(c, req, res);
}

function serveBundle(c: DoorContext, req: IncomingMessage, res: ServerResponse) {
  let size: number;
  try {
    size = c.o.bundleFile === null ? -1 : statSync(c.o.bundleFile).size;
  } catch {
    size = -1;
  }
  if (c.o.bundleFile === null || size < 0) {
    record(c, req, 'bundle', NO_BUNDLE);
    sendReply(res, NO_BUNDLE);
    return;
  }
  record(c, req, 'bundle', { status: 200 });
  res.writeHead(200, {
    'content-type': 'text/javascript',
    'content-length': String(size),
    'cache-control': 'no-store',
  });
  createReadStream(c.o.bundleFile).pipe(res);
}

async function onUpgrade(
  c: DoorContext,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): Promise<void> {
  const m = match(req);
  if (!m || m.action !== 'session') {
    record(c, req, 'other', NOT_FOUND);
    sendReplyOnSocket(socket, NOT_FOUND);
    return;
  }
  const resolved = await resolve(c, m.token, sourceOf(req));
  if ('status' in resolved) {
    record(c, req, m.action, resolved);
    sendReplyOnSocket(socket, resolved);
    return;
  }
  const { runner, cell } = resolved;
  let upstream: WebSocket;
  try {
    // (d) every attempt: a fresh secret, then the upstream handshake carrying it
    const secret = await c.o.cells.fetchSecret(cell.url, runner.id);
    upstream = await c.o.cells.openSession(cell.url, secret);
  } catch (err) {
    const refused = err instanceof CellCallError && err.kind === 'refused';
    const r = refused ? cellRefused(c.retryAfter()) : cellUnreachable(c.retryAfter());
    c.log.warn(
      { cell: cell.name, why: err instanceof Error ? err.message : 'error' },
      'cell call failed',
    );
    record(c, req, m.action, r);
    sendReplyOnSocket(socket, r);
    return;
  }
  if (socket.destroyed) {
    upstream.terminate();
    return;
  }
  c.wss.handleUpgrade(req, socket, head, (client) => {
    record(c, req, m.action, { status: 101 });
    relay(client, upstream, c.sessions.add(runner.id, closePair(client, upstream)));
    // openSession left it paused: the cell may speak first (HTTP/2's SETTINGS)
    upstream.resume();
  });
}
