import { WebSocket } from 'ws';
import {
  CONNECTION_SECRET_HEADER,
  MAX_SESSION_FRAME_BYTES,
  SECRET_PATH,
  SESSION_PATH,
} from '@leoflow/protocol';
import type { DoorCredentialIssuer } from '../door-credential.js';

/** Why a cell call failed: the door answers 503 (unreachable) or 502 (refused), never 401. */
export class CellCallError extends Error {
  constructor(
    readonly kind: 'unreachable' | 'refused',
    message: string,
  ) {
    super(message);
  }
}

/** The door's two calls to a cell. An interface so tests and benchmarks can count them. */
export interface CellClient {
  /** a fresh per-connection secret for the runner (every connection attempt; never cached) */
  fetchSecret(cellUrl: string, runner_id: string): Promise<string>;
  /**
   * Opens the upstream session with the secret injected; resolves once the cell accepted, with
   * the socket paused, so nothing the cell sends first is lost before the relay is attached.
   */
  openSession(cellUrl: string, secret: string): Promise<WebSocket>;
}

export function httpCellClient(credential: DoorCredentialIssuer, timeoutMs: number): CellClient {
  return {
    async fetchSecret(cellUrl, runner_id) {
      const bearer = await credential.mint(runner_id);
      let res: Response;
      try {
        res = await fetch(new URL(SECRET_PATH, cellUrl), {
          method: 'POST',
          headers: { authorization: `Bearer ${bearer}` },
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch {
        throw new CellCallError('unreachable', 'the cell did not answer the secret request');
      }
      if (res.status !== 200) {
        await res.body?.cancel();
        throw new CellCallError(
          'refused',
          `the cell answered the secret request with ${res.status}`,
        );
      }
      const body = (await res.json().catch(() => ({}))) as { secret?: unknown };
      if (typeof body.secret !== 'string' || body.secret === '') {
        throw new CellCallError('refused', 'the cell sent no secret');
      }
      return body.secret;
    },

    openSession(cellUrl, secret) {
      const url = new URL(SESSION_PATH, cellUrl);
      url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      return new Promise((resolve, reject) => {
        const ws = new WebSocket(url, {
          headers: { [CONNECTION_SECRET_HEADER]: secret },
          handshakeTimeout: timeoutMs,
          maxPayload: MAX_SESSION_FRAME_BYTES,
          perMessageDeflate: false,
        });
        ws.once('open', () => {
          ws.pause();
          ws.removeAllListeners('error');
          resolve(ws);
        });
        ws.once('unexpected-response', (_req, res) => {
          res.resume();
          ws.terminate();
          reject(
            new CellCallError(
              'refused',
              `the cell refused the session with ${res.statusCode ?? 0}`,
            ),
          );
        });
        ws.once('error', () => {
          reject(new CellCallError('unreachable', 'the cell could not be reached for the session'));
        });
      });
    },
  };
}
