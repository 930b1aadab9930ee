import { createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { AgentService } from '@leoflow/protocol';
import type { TokenHolder } from './token.js';

export type AgentClient = Client<typeof AgentService>;

/** Reads the holder on every call, so a renewal applies to the very next RPC. */
export function bearerInterceptor(tokens: TokenHolder): Interceptor {
  return (next) => async (req) => {
    req.header.set('authorization', `Bearer ${tokens.current()}`);
    return next(req);
  };
}

/** gRPC over HTTP/2: h2c for http:// (Lite, loopback), TLS for https://. */
export function createAgentClient(baseUrl: string, tokens: TokenHolder): AgentClient {
  const transport = createGrpcTransport({
    baseUrl,
    interceptors: [bearerInterceptor(tokens)],
    // Notice a dead control plane between heartbeats instead of on the next call's timeout.
    pingIntervalMs: 30_000,
    pingTimeoutMs: 10_000,
  });
  return createClient(AgentService, transport);
}
