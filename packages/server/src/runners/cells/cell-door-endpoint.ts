import {
  CONNECTION_SECRET_HEADER,
  MAX_SESSION_FRAME_BYTES,
  SECRET_PATH,
  SESSION_PATH,
} from '@leoflow/protocol';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import type { DoorCredentialVerifier } from '../door-credential.js';
import type { RunnerStore } from '../../store/ports/runners.js';
import type { ConnectionGrant, ConnectionSecrets } from './connection-secrets.js';
import { type RunnerSessions } from '../runner-sessions.js';
import { SESSION_CLOSE } from '@leoflow/protocol';

/** Frames larger than this close the session (1009): the runner protocol sends small frames. */

export interface CellDoorEndpointOptions {
  host: string;
  port: number;
  verifier: DoorCredentialVerifier;
  runners: Pick<RunnerStore, 'runnerById'>;
  secrets: ConnectionSecrets;
  sessions: RunnerSessions;
  logger: Logger;
  /**
   * Whether this cell serves the grant's tenant now (its current placement names this cell):
   * checked after the secret, before the upgrade; a refusal is a 403 like a bad secret.
   * Absent: every tenant (a test's lone cell).
   */
  serves?: (grant: ConnectionGrant) => Promise<boolean>;
  /**
   * What runs inside an accepted session: the runner protocol (cell-session.ts). Absent: the
   * session is held open, and closed on delete.
   */
  onSession?: (grant: ConnectionGrant, ws: WebSocket) => void;
}

export interface CellDoorEndpoint {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * The cell's side of the door, on its own internal listener (never the public REST port): the
 * door fetches a fresh per-connection secret here with its signed credential, then opens the
 * session upgrade with that secret in CONNECTION_SECRET_HEADER. The runner's token never
 * arrives here; the secret never leaves the door.
 */
export async function startCellDoorEndpoint(o: CellDoorEndpointOptions): Promise<CellDoorEndpoint> {
  const log = o.logger.child({ component: 'cell-door-endpoint' });
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_SESSION_FRAME_BYTES });

  const server: Server = createServer((req, res) => {
    void handleRequest(req, res).catch((err: unknown) => {
      log.error({ err }, 'connection secret request failed');
      if (!res.headersSent) reply(res, 500, { code: 'LF_INTERNAL', message: 'internal error' });
    });
  });

  async function handleRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST' || req.url !== SECRET_PATH) {
      reply(res, 404, { code: 'LF_ROUTE_NOT_FOUND', message: 'not a cell door endpoint' });
      return;
    }
    const auth = req.headers.authorization ?? '';
    const bearer = auth.startsWith('Bearer ') ? auth.slice(7) : '';
    const claims = bearer === '' ? undefined : await o.verifier.verify(bearer);
    if (!claims) {
      reply(res, 401, {
        code: 'LF_UNAUTHENTICATED',
        message: 'not a door credential this cell trusts',
      });
      return;
    }
    const runner = await o.runners.runnerById(claims.runner_id);
    if (!runner || runner.kind !== 'inbound') {
      reply(res, 404, { code: 'LF_RUNNER_NOT_FOUND', message: 'no such inbound runner' });
      return;
    }
    const { secret, expires_at } = o.secrets.mint({
      runner_id: runner.id,
      tenant_id: runner.tenant_id,
    });
    reply(res, 200, { secret, expires_at });
  }

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const raw = req.headers[CONNECTION_SECRET_HEADER];
    const secret = typeof raw === 'string' ? raw : '';
    const grant = req.url === SESSION_PATH && secret !== '' ? o.secrets.consume(secret) : undefined;
    const refuse = () =>
      socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    if (!grant) {
      refuse();
      return;
    }
    if (!o.serves) {
      accept(req, socket, head, grant);
      return;
    }
    o.serves(grant).then(
      (yes) => {
        if (yes) {
          accept(req, socket, head, grant);
          return;
        }
        log.warn(
          { runner_id: grant.runner_id, tenant_id: grant.tenant_id },
          'runner session refused: its tenant is not placed on this cell',
        );
        refuse();
      },
      (err: unknown) => {
        log.error({ err }, 'placement check failed; runner session refused');
        refuse();
      },
    );
  });

  function accept(req: IncomingMessage, socket: Duplex, head: Buffer, grant: ConnectionGrant) {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const remove = o.sessions.add(grant.runner_id, ws);
      ws.on('close', remove);
      ws.on('error', () => ws.terminate());
      log.info({ runner_id: grant.runner_id }, 'runner session opened');
      o.onSession?.(grant, ws);
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : o.port;
  return {
    url: `http://${o.host.includes(':') ? `[${o.host}]` : o.host}:${port}`,
    port,
    async close() {
      o.sessions.closeAll(SESSION_CLOSE.shuttingDown);
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

function reply(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}
