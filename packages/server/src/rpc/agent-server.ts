import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import type { ServiceImpl } from '@connectrpc/connect';
import { AgentService } from '@leoflow/protocol';

export interface AgentRpcServer {
  port: number;
  close(): Promise<void>;
}

/** The agent RPC listener: gRPC (and Connect) over cleartext HTTP/2, loopback in Lite. */
export async function startAgentRpcServer(
  impl: ServiceImpl<typeof AgentService>,
  host: string,
  port: number,
): Promise<AgentRpcServer> {
  const handler = connectNodeAdapter({
    routes: (router) => router.service(AgentService, impl),
    grpc: true,
    connect: true,
    grpcWeb: false,
  });
  const server = http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
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
