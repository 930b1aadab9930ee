import { createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { AgentService } from '@leoflow/protocol';
import type { TokenHolder } from './token.js';

export type AgentClient = Client<typeof AgentService>;

/** The agent session key header (see TokenHolder.sessionKey). */
export const SESSION_HEADER = 'leoflow-session';

/** Reads the holder on every call, so a renewal applies to the very next RPC. */
export function bearerInterceptor(tokens: TokenHolder): Interceptor {
  return (next) => async (req) => {
    req.header.set('authorization', `Bearer ${tokens.current()}`);
    req.header.set(SESSION_HEADER, tokens.sessionKey);
    return next(req);
  };
}

export interface AgentConnection {
  client: AgentClient;
  /**
   * Opens the HTTP/2 session without sending a request (a standby agent warming up), resolving
   * once it is open, failed, or `timeoutMs` passed; never rejects.
   */
  warmUp: (timeoutMs: number) => Promise<void>;
}

/** gRPC over HTTP/2: h2c for http:// (Lite, loopback), TLS for https://. */
export function createAgentConnection(baseUrl: string, tokens: TokenHolder): AgentConnection {
  // The transport would build this same manager itself; holding it lets a standby agent open
  // the session ahead of its first call.
  const sessions = new Http2SessionManager(baseUrl, {
    // Notice a dead control plane between heartbeats instead of on the next call's timeout.
    pingIntervalMs: 30_000,
    pingTimeoutMs: 10_000,
  });
  const transport = createGrpcTransport({
    baseUrl,
    interceptors: [bearerInterceptor(tokens)],
    sessionManager: sessions,
  });
  return {
    client: createClient(AgentService, transport),
    warmUp: async (timeoutMs) => {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        sessions.connect().catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}

export function createAgentClient(baseUrl: string, tokens: TokenHolder): AgentClient {
  return createAgentConnection(baseUrl, tokens).client;
}
