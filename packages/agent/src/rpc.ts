import { SESSION_HEADER } from '@leoflow/protocol';
import {
  Code,
  ConnectError,
  createClient,
  type Client,
  type Interceptor,
} from '@connectrpc/connect';
import { createGrpcTransport, type Http2SessionManager } from '@connectrpc/connect-node';
import { AgentService } from '@leoflow/protocol';
import { AgentEndpoints, failoverTransport, parseAgentUrls } from './endpoints.js';
import { classifyFailure } from './retry.js';
import type { TokenHolder } from './token.js';

export type AgentClient = Client<typeof AgentService>;

/** The agent session key header (see TokenHolder.sessionKey). */

/** Reads the holder on every call, so a renewal applies to the very next RPC. */
export function bearerInterceptor(tokens: TokenHolder): Interceptor {
  return (next) => async (req) => {
    // The exchange carries its platform credential in the body and takes no bearer.
    if (req.method.name === AgentService.method.exchangeToken.name) return next(req);
    req.header.set('authorization', `Bearer ${tokens.current()}`);
    req.header.set(SESSION_HEADER, tokens.sessionKey);
    return next(req);
  };
}

/**
 * Drops an HTTP/2 session that went silent. A control plane that dies or restarts normally
 * closes its connections (the session manager then dials a new session on the next call), but a
 * peer that vanishes without a FIN/RST — a host gone, a NAT entry dropped — leaves a session that
 * looks open: every call on it times out until the keepalive PING gives up (30 s + 10 s). When a
 * call times out and no call at all has been answered since it started, the session is presumed
 * dead and aborted, so the retry dials afresh. Calls still in flight on it fail with `Canceled`
 * and, not being the agent's own cancel, are retried like any transport failure.
 */
export function staleSessionInterceptor(
  abortSession: () => void,
  now: () => number = Date.now,
): Interceptor {
  let lastAnswerAt = Number.NEGATIVE_INFINITY;
  return (next) => async (req) => {
    const startedAt = now();
    try {
      const res = await next(req);
      lastAnswerAt = now();
      return res;
    } catch (err) {
      const kind = classifyFailure(err);
      if (kind === 'final' || kind === 'transient') {
        lastAnswerAt = now(); // the server answered: the session is alive
      } else if (
        ConnectError.from(err).code === Code.DeadlineExceeded &&
        lastAnswerAt < startedAt
      ) {
        abortSession();
      }
      throw err;
    }
  };
}

export interface AgentConnection {
  client: AgentClient;
  /** the URLs the client dials, the current one among them */
  endpoints: AgentEndpoints;
  /**
   * Opens the HTTP/2 session without sending a request (a standby agent warming up), resolving
   * once it is open, failed, or `timeoutMs` passed; never rejects.
   */
  warmUp: (timeoutMs: number) => Promise<void>;
}

/**
 * gRPC over HTTP/2 (h2c for http://, Lite and loopback; TLS for https://) to the control plane
 * at `agentUrl`: one URL, or several comma-separated (every replica's agent URL). Calls go to one
 * of them at a time and move on to the next after a transport failure (endpoints.ts), so an
 * agent whose replica dies carries on with another on its next retry.
 */
export function createAgentConnection(
  agentUrl: string,
  tokens: TokenHolder,
  opts: { onSwitch?: (from: string, to: string, why: string) => void } = {},
): AgentConnection {
  // Holding the session managers lets a standby agent open its session ahead of its first
  // call, and lets a dead session be dropped. After a session closes or fails, its manager
  // dials a new one on the next call to that URL.
  const endpoints = new AgentEndpoints(parseAgentUrls(agentUrl), opts);
  const transport = failoverTransport(endpoints, (e) => [
    bearerInterceptor(tokens),
    staleSessionInterceptor(() => {
      e.sessions.abort(new ConnectError('agent dropped a silent HTTP/2 session', Code.Canceled));
    }),
  ]);
  return {
    client: createClient(AgentService, transport),
    endpoints,
    warmUp: async (timeoutMs) => {
      const { url, sessions } = endpoints.current;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        sessions
          .connect()
          .then(() => rehearseCalls(url, sessions, timeoutMs))
          .catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}

/**
 * The first calls a fresh process makes run cold code (the client's call path, HTTP/2 stream
 * set-up, header and trailer handling): tens of milliseconds before any byte is on the wire.
 * A standby agent pays that while it waits, with the calls its attempt will make first, sent
 * WITHOUT a bearer: the agent port's gate refuses each before reading its body, so no handler
 * runs and nothing is recorded.
 */
async function rehearseCalls(
  baseUrl: string,
  sessions: Http2SessionManager,
  timeoutMs: number,
): Promise<void> {
  const anonymous = createClient(
    AgentService,
    createGrpcTransport({ baseUrl, sessionManager: sessions }),
  );
  const opts = { timeoutMs };
  const refused = () => undefined;
  await anonymous.register({ hostname: 'standby-rehearsal' }, opts).catch(refused);
  await Promise.all([
    anonymous.getVariables({}, opts).catch(refused),
    anonymous.getConnections({}, opts).catch(refused),
    anonymous.heartbeat({}, opts).catch(refused),
  ]);
}

export function createAgentClient(baseUrl: string, tokens: TokenHolder): AgentClient {
  return createAgentConnection(baseUrl, tokens).client;
}
