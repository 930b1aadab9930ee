import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { createWebSocketStream, type WebSocket } from 'ws';
import type { RunnerSessionIdentity } from '../../rpc/agent-auth.js';
import {
  createAgentRequestHandler,
  type AgentRequestHandlerOptions,
} from '../../rpc/agent-server.js';
import type { ConnectionGrant } from './connection-secrets.js';
import { fenceOffPeerEof } from '@leoflow/protocol';

export interface CellSessionServer {
  /** Runs the agent service over an accepted door session, as that session's runner. */
  accept(grant: ConnectionGrant, ws: WebSocket): void;
  /**
   * The same over any byte stream the cell has authenticated itself (an ssh runner's channel to
   * the daemon's `--stdio`): the stream's requests without a bearer are this runner.
   */
  serve(runner: RunnerSessionIdentity, stream: Duplex): void;
  /** live HTTP/2 sessions (one per door session) */
  readonly sessions: number;
  close(): void;
}

/**
 * The cell's side of a runner session: HTTP/2 over the door's WebSocket stream into the agent
 * service, behind the same gate as the agent port. A request without a bearer is the session's
 * runner (only AwaitAssignment admits it); a request with an attempt token is that attempt,
 * exactly as on the agent port, so the session never stands in for an attempt.
 */
export function createCellSessionServer(
  opts: Omit<AgentRequestHandlerOptions, 'sessionOf'>,
): CellSessionServer {
  const runners = new WeakMap<http2.Http2Session, RunnerSessionIdentity>();
  const live = new Set<http2.ServerHttp2Session>();
  const streams = new Set<Duplex>();
  const server = http2.createServer(
    createAgentRequestHandler({
      ...opts,
      sessionOf: (req) => runners.get(req.stream.session as http2.Http2Session),
    }),
  );
  // The server emits 'session' synchronously inside emit('connection'): the grant being
  // accepted is the one that session belongs to.
  let accepting: RunnerSessionIdentity | undefined;
  server.on('session', (s: http2.ServerHttp2Session) => {
    if (accepting) runners.set(s, accepting);
    live.add(s);
    s.once('close', () => live.delete(s));
  });
  return {
    accept(grant, ws) {
      this.serve(
        { runner_id: grant.runner_id, tenant_id: grant.tenant_id },
        createWebSocketStream(ws),
      );
    },
    serve(runner, stream) {
      stream.on('error', () => stream.destroy());
      streams.add(stream);
      stream.once('close', () => streams.delete(stream));
      accepting = { ...runner };
      try {
        server.emit('connection', fenceOffPeerEof(stream));
      } finally {
        accepting = undefined;
      }
    },
    get sessions() {
      return live.size;
    },
    close() {
      // Destroying the byte streams destroys their sessions without a shutdown (peer-eof-fence).
      for (const st of streams) st.destroy();
      streams.clear();
    },
  };
}
