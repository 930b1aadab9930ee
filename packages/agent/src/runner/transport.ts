import { createConnection } from 'node:net';
import { Duplex } from 'node:stream';
import { createWebSocketStream, WebSocket } from 'ws';
import { fenceOffPeerEof, SESSION_CLOSE } from '@leoflow/protocol';

/** The close code a cell sends when the runner was deleted. */
export const RUNNER_DELETED_CLOSE = SESSION_CLOSE.runnerDeleted.code;

/**
 * A byte pipe to the cell that HTTP/2 runs over. The door transport dials a new WebSocket
 * session per HTTP/2 connection (so a dropped session is re-dialled by the next call); the stdio
 * transport (an ssh runner: the cell started this bundle over an SSH channel) has exactly one.
 */
export interface RunnerTransport {
  /** a new stream to the cell; called once per HTTP/2 connection */
  connect(): Duplex;
  /** false: the one stream is all there is; when it ends the daemon ends */
  readonly reconnects: boolean;
  /** why the door refused this runner for good (token refused, runner deleted), once it did */
  readonly refused: string | undefined;
  /** the longest wait between redials (default: the door's 30 s) */
  readonly maxReconnectDelayMs?: number;
  /** why the last stream failed (a refused connection, the door's answer), if it said */
  readonly lastError: string | undefined;
  /** `listener` runs each time the cell speaks on a new stream (a session is up) */
  onSessionUp(listener: () => void): void;
}

/**
 * Lite's host agent: the control plane's unix socket (a 0600 file in its 0700 data dir, so only
 * the control plane's own user connects; tasks run as other uids and never see the data dir). A
 * restarted control plane listens on the same path again and the daemon redials within a second.
 */
export function socketTransport(path: string): RunnerTransport {
  let lastError: string | undefined;
  const up: Array<() => void> = [];
  return {
    reconnects: true,
    refused: undefined,
    maxReconnectDelayMs: 1_000,
    get lastError() {
      return lastError;
    },
    onSessionUp(listener) {
      up.push(listener);
    },
    connect() {
      lastError = undefined;
      const socket = createConnection(path);
      socket.once('data', () => {
        for (const l of up) l();
      });
      // Every error (a refused connect also fails the writes queued behind it) just closes the
      // stream: passed on, a refused connect surfaced again as an uncaught exception and ended
      // the daemon with its attempts (measured with a control plane restarting).
      socket.on('error', () => socket.destroy());
      return fenceOffPeerEof(socket, {
        onError: (err) => {
          lastError = `the control plane's socket failed: ${err.message}`;
        },
      });
    },
  };
}

/** A door session per connection: ws(s)://<door>/runners/<token>/session. */
export function doorTransport(sessionUrl: string): RunnerTransport {
  let refused: string | undefined;
  let lastError: string | undefined;
  const up: Array<() => void> = [];
  return {
    reconnects: true,
    get refused() {
      return refused;
    },
    get lastError() {
      return lastError;
    },
    onSessionUp(listener) {
      up.push(listener);
    },
    connect() {
      lastError = undefined;
      const ws = new WebSocket(sessionUrl, { handshakeTimeout: 10_000 });
      ws.once('message', () => {
        for (const l of up) l();
      });
      // Attached now, before 'open': the cell speaks first (HTTP/2 SETTINGS), and ws's stream
      // defers writes made while the socket is still connecting.
      const stream = createWebSocketStream(ws);
      ws.on('unexpected-response', (_req, res) => {
        if (res.statusCode === 401) {
          refused =
            'the door refused the runner token (401): the runner was deleted or the token is wrong; register it again and use the new launch command';
        }
        res.resume();
        stream.destroy(new Error(`the door answered ${res.statusCode ?? '?'}`));
      });
      ws.on('close', (code) => {
        if (code === RUNNER_DELETED_CLOSE) {
          refused =
            'the runner was deleted (session closed with 4401); register it again and use the new launch command';
        }
      });
      stream.on('error', () => ws.terminate());
      // Never an error event into HTTP/2 (see fenceOffPeerEof): the reason is kept for the log.
      return fenceOffPeerEof(stream, {
        onError: (err) => {
          lastError = `the door session failed: ${err.message}`;
        },
      });
    },
  };
}

/** The protocol over this process's stdin/stdout (stdout then carries nothing else). */
export function stdioTransport(
  input: NodeJS.ReadableStream = process.stdin,
  output: NodeJS.WritableStream = process.stdout,
): RunnerTransport {
  let used = false;
  let lastError: string | undefined;
  return {
    reconnects: false,
    refused: undefined,
    get lastError() {
      return lastError;
    },
    onSessionUp() {},
    connect() {
      if (used) throw new Error('the stdio transport has one stream');
      used = true;
      return fenceOffPeerEof(Duplex.from({ readable: input, writable: output }), {
        onError: (err) => {
          lastError = `the stdio stream failed: ${err.message}`;
        },
      });
    },
  };
}
