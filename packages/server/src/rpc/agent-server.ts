import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { Code, ConnectError, type Interceptor, type ServiceImpl } from '@connectrpc/connect';
import { AgentService } from '@leoflow/protocol';

export interface AgentRpcServer {
  port: number;
  close(): Promise<void>;
}

export interface AgentTls {
  cert: Buffer;
  key: Buffer;
}

/**
 * The agent RPC listener: gRPC (and Connect) over HTTP/2 — cleartext (h2c) on loopback in Lite,
 * TLS when certificates are configured.
 */
export async function startAgentRpcServer(
  impl: ServiceImpl<typeof AgentService>,
  host: string,
  port: number,
  tls: AgentTls | null = null,
  onInternalError: (err: unknown) => void = () => undefined,
): Promise<AgentRpcServer> {
  const handler = connectNodeAdapter({
    routes: (router) => router.service(AgentService, impl),
    interceptors: [sanitizeInternalErrors(onInternalError)],
    grpc: true,
    connect: true,
    grpcWeb: false,
  });
  const server = tls
    ? http2.createSecureServer({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }, handler)
    : http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  // Both server kinds emit 'session' with an Http2Session.
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sessions) s.close();
        server.close(() => resolve());
        setTimeout(() => {
          for (const s of sessions) s.destroy();
        }, 2_000).unref();
      }),
  };
}

/**
 * An unexpected error reaches the agent as a bare Internal: its message could carry details
 * (a SQL fragment, a path) that task code has no business seeing. The full error is logged.
 */
function sanitizeInternalErrors(onInternalError: (err: unknown) => void): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (err instanceof ConnectError && err.code !== Code.Internal && err.code !== Code.Unknown)
        throw err;
      onInternalError(err);
      throw new ConnectError('internal error; see the control-plane log', Code.Internal);
    }
  };
}
