import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import {
  Code,
  ConnectError,
  createContextKey,
  createContextValues,
  type Interceptor,
  type ServiceImpl,
} from '@connectrpc/connect';
import type { Compression } from '@connectrpc/connect/protocol';
import { AgentService } from '@leoflow/protocol';
import type { ServerConfig } from '../config/server-config.js';
import { isLoopbackHost } from '../attempts/secret-delivery.js';
import {
  ADMITTED_BEARER,
  type AgentAuthentication,
  type BearerCheck,
  type RunnerSessionIdentity,
} from './agent-auth.js';
import { createGrpcUnaryHandler } from './grpc-unary.js';

/**
 * The largest request message the agent port reads, on the wire and after decompression. The
 * agent's own messages stay far below it (a PushLogs batch is at most ~1 MiB, an XCom 256 KiB).
 */
export const AGENT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export interface AgentRpcServer {
  port: number;
  /**
   * TLS only: serves connections accepted from now on with this pair; open connections keep
   * theirs. Throws when the pair does not build a context (the serving one stays). Use it through
   * AgentTlsReloader (agent-tls.ts), which checks the pair first.
   */
  setTls?(tls: AgentTls): void;
  close(): Promise<void>;
}

export interface AgentTls {
  cert: Buffer;
  key: Buffer;
}

/**
 * What the agent channel of a configuration protects: TLS; cleartext on loopback (only local
 * processes reach it); or cleartext on a routable address, over which the control plane never
 * delivers a secret. The control plane and doctor both read it from here.
 */
export type AgentChannelMode = 'tls' | 'cleartext-loopback' | 'cleartext-non-loopback';

export function agentChannelMode(
  agent: Pick<ServerConfig['agent'], 'host' | 'tls'>,
): AgentChannelMode {
  if (agent.tls !== null) return 'tls';
  return isLoopbackHost(agent.host) ? 'cleartext-loopback' : 'cleartext-non-loopback';
}

export interface AgentRpcServerOptions {
  impl: ServiceImpl<typeof AgentService>;
  host: string;
  port: number;
  tls?: AgentTls | null;
  /**
   * Agent authentication (agent-auth.ts). Its `admit` decides from the Authorization header alone
   * whether a caller may send a body at all — before a byte of the request body is read, so an
   * anonymous caller can make the server neither buffer nor inflate anything — and what it
   * verified reaches its interceptor, which puts the principal on the call context.
   */
  auth: AgentAuthentication;
  onInternalError?: (err: unknown) => void;
  /** per-message cap, read and inflated; defaults to AGENT_MAX_MESSAGE_BYTES */
  maxMessageBytes?: number;
  /** observes every chunk the gzip decoder produces (tests count inflated bytes with it) */
  onInflate?: (bytes: number) => void;
  /**
   * How unary calls are served: 'lean' (default: grpc-unary.ts, the same interceptors and
   * implementation without Connect's streaming pipeline) or 'connect' (everything through
   * Connect's node adapter; the bench measures both side by side). Streaming calls, compressed
   * requests and anything unexpected go through Connect either way.
   */
  unaryPath?: 'lean' | 'connect';
}

/**
 * Set once a request reached the interceptors (it was read, inflated and parsed), or when the
 * gate answered it: either way the status text is ours and is passed through as is.
 */
interface RequestMark {
  ownText: boolean;
  /** what the gate verified, handed to the authentication interceptor */
  bearer?: BearerCheck;
}
const MARK = createContextKey<RequestMark | undefined>(undefined);

/**
 * The agent RPC listener: gRPC over HTTP/2 — cleartext (h2c) on loopback in Lite, TLS when
 * certificates are configured. Every request passes a gate before Connect sees it: no bearer that
 * verifies, no body read. Messages are capped on the wire and after gzip inflation, and errors
 * raised before the service code ran (size, encoding, malformed protobuf) reach the caller as a
 * fixed text per code, never the parser's.
 */
export async function startAgentRpcServer(opts: AgentRpcServerOptions): Promise<AgentRpcServer> {
  const port = await bindAgentPort(opts);
  port.serve(opts);
  return port;
}

/** The agent port once bound: its number is known, and it serves once `serve` is called. */
export interface AgentPort extends AgentRpcServer {
  /** From now on requests reach the agent service; until then they are answered Unavailable. */
  serve(handler: AgentRequestHandlerOptions): void;
}

/**
 * Binds the agent port before the service behind it exists, so the URL agents dial is a value
 * from the start (boot/ builds the plane with it). A request that arrives before `serve` is
 * answered Unavailable, which agents retry.
 */
export async function bindAgentPort(
  opts: Pick<AgentRpcServerOptions, 'host' | 'port' | 'tls'>,
): Promise<AgentPort> {
  let serving: ReturnType<typeof createAgentRequestHandler> | null = null;
  const handler = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => {
    if (serving) {
      serving(req, res);
      return;
    }
    refuse(res, { ownText: true }, Code.Unavailable, 'the control plane is starting; retry');
  };
  const secure = opts.tls
    ? http2.createSecureServer(
        { cert: opts.tls.cert, key: opts.tls.key, minVersion: 'TLSv1.2' },
        handler,
      )
    : undefined;
  const server = secure ?? http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  // Both server kinds emit 'session' with an Http2Session.
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    serve(handlerOpts) {
      serving = createAgentRequestHandler(handlerOpts);
    },
    ...(secure
      ? {
          setTls: (tls: AgentTls) =>
            secure.setSecureContext({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }),
        }
      : {}),
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

/** What the agent RPC request handler needs: the listener's options without where it listens. */
export type AgentRequestHandlerOptions = Omit<AgentRpcServerOptions, 'host' | 'port' | 'tls'> & {
  /**
   * The runner whose door session a request arrived through (cell-session.ts); such a request
   * may come without a bearer, as that runner. Absent on the agent port: no request is.
   */
  sessionOf?: (req: http2.Http2ServerRequest) => RunnerSessionIdentity | undefined;
};

/**
 * The agent service behind its gate, as an HTTP/2 request handler: the agent port serves it,
 * and so does every runner door session (the same gate, caps and error texts).
 */
export function createAgentRequestHandler(
  opts: AgentRequestHandlerOptions,
): (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void {
  const maxBytes = opts.maxMessageBytes ?? AGENT_MAX_MESSAGE_BYTES;
  const onInternalError = opts.onInternalError ?? (() => undefined);
  const marks = new WeakMap<object, RequestMark>();
  const interceptors = [
    markParsed(),
    sanitizeInternalErrors(onInternalError),
    opts.auth.interceptor,
  ];
  const gzip = cappedGzip(maxBytes, opts.onInflate);
  const contextValues = (req: object) => {
    const mark = marks.get(req);
    return createContextValues().set(MARK, mark).set(ADMITTED_BEARER, mark?.bearer);
  };
  const connectHandler = connectNodeAdapter({
    routes: (router) => router.service(AgentService, opts.impl),
    interceptors,
    // The agent speaks gRPC only; the Connect protocol would carry errors in a JSON body instead
    // of trailers and widen what this port parses.
    grpc: true,
    connect: false,
    grpcWeb: false,
    readMaxBytes: maxBytes,
    acceptCompression: [gzip],
    contextValues,
  });
  const lean =
    opts.unaryPath === 'connect'
      ? null
      : createGrpcUnaryHandler({
          service: AgentService,
          impl: opts.impl,
          interceptors,
          readMaxBytes: maxBytes,
          responseCompression: gzip,
          contextValues,
        });
  const call = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => {
    if (lean?.(req, res)) return;
    connectHandler(req, res);
  };
  const handler = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => {
    const mark: RequestMark = { ownText: false };
    marks.set(req, mark);
    sanitizeProtocolErrors(res, mark, maxBytes);
    resetUnreadBodyOnceAnswered(req);
    let authorization = req.headers['authorization'];
    if (Array.isArray(authorization)) authorization = undefined;
    if (!authorization && isExchangeCall(req)) {
      // The one RPC without a bearer: its body (capped like every other) carries the platform
      // credential. With a bearer it takes the usual path and its row refuses it.
      mark.bearer = { kind: 'exchange-body' };
      call(req, res);
      return;
    }
    opts.auth.admit(authorization, opts.sessionOf?.(req)).then(
      (bearer) => {
        mark.bearer = bearer;
        if (bearer) call(req, res);
        else refuse(res, mark, Code.Unauthenticated, 'missing or invalid agent token');
      },
      (err: unknown) => {
        onInternalError(err);
        refuse(res, mark, Code.Internal, 'internal error; see the control-plane log');
      },
    );
  };
  return handler;
}

/** The gRPC path of ExchangeToken, the one RPC the gate lets through without a bearer. */
export const EXCHANGE_TOKEN_PATH = `/${AgentService.typeName}/${AgentService.method.exchangeToken.name}`;

function isExchangeCall(req: http2.Http2ServerRequest): boolean {
  return req.method === 'POST' && req.url === EXCHANGE_TOKEN_PATH;
}

/**
 * Once the answer (trailers included) is on the wire, a body still arriving — an over-limit
 * message, a refused caller — is not read on: the stream is reset with NO_ERROR so the client
 * stops sending. Resetting earlier would overtake the trailers, hence the wait for the stream's
 * local close (END_STREAM sent), checked briefly after the response finishes.
 */
function resetUnreadBodyOnceAnswered(req: http2.Http2ServerRequest): void {
  const stream = req.stream;
  stream.once('finish', () => {
    // The usual case: the whole body was read before the answer; nothing left to stop.
    if (req.complete || stream.closed || stream.destroyed) return;
    const deadline = Date.now() + 5_000;
    const check = (): void => {
      if (req.complete || stream.closed || stream.destroyed) return;
      if (stream.state.localClose || Date.now() > deadline) {
        stream.close(http2.constants.NGHTTP2_NO_ERROR);
        return;
      }
      setTimeout(check, 5).unref();
    };
    setImmediate(check);
  });
}

/** A gRPC error answered by the gate: headers, then the status in trailers; the body is not read. */
function refuse(
  res: http2.Http2ServerResponse,
  mark: RequestMark,
  code: Code,
  message: string,
): void {
  mark.ownText = true;
  res.writeHead(200, { 'content-type': 'application/grpc+proto' });
  res.addTrailers({ 'grpc-status': String(code), 'grpc-message': encodeURIComponent(message) });
  res.end();
}

/** Fixed texts for errors raised by the protocol layer, before any service code ran. */
function protocolErrorText(code: Code, maxBytes: number): { code: Code; message: string } {
  switch (code) {
    case Code.ResourceExhausted:
      return {
        code,
        message: `request message larger than the agent port's limit of ${maxBytes} bytes`,
      };
    case Code.Unimplemented:
      return { code, message: 'request encoding not supported (send identity or gzip)' };
    case Code.Canceled:
      return { code, message: 'request canceled' };
    case Code.DeadlineExceeded:
      return { code, message: 'deadline exceeded' };
    default:
      // Malformed protobuf, a broken envelope or gzip stream: the request could not be decoded.
      return { code: Code.InvalidArgument, message: 'request message could not be decoded' };
  }
}

/**
 * The gRPC status of a request that never reached the service (its body failed to read, inflate
 * or parse) is rewritten to a fixed text per code: the parser's message (`parse binary: illegal
 * tag…`) describes our decoder to whoever probes it and is of no use to a real agent.
 */
function sanitizeProtocolErrors(
  res: http2.Http2ServerResponse,
  mark: RequestMark,
  maxBytes: number,
): void {
  const addTrailers = res.addTrailers.bind(res);
  res.addTrailers = (headers: http2.OutgoingHttpHeaders) => {
    const status = Number(headers['grpc-status'] ?? 0);
    if (status !== 0 && !mark.ownText) {
      const fixed = protocolErrorText(status, maxBytes);
      const out: http2.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(headers)) {
        if (k !== 'grpc-status' && k !== 'grpc-message' && k !== 'grpc-status-details-bin')
          out[k] = v;
      }
      out['grpc-status'] = String(fixed.code);
      out['grpc-message'] = encodeURIComponent(fixed.message);
      addTrailers(out);
      return;
    }
    addTrailers(headers);
  };
}

function markParsed(): Interceptor {
  return (next) => (req) => {
    const mark = req.contextValues.get(MARK);
    if (mark) mark.ownText = true;
    return next(req);
  };
}

/**
 * gzip with the inflated size capped: the decoder stops (and the request fails with
 * ResourceExhausted) as soon as its output passes the cap, so a small body that would inflate
 * to gigabytes costs at most the cap plus one zlib chunk.
 */
function cappedGzip(maxBytes: number, onInflate?: (bytes: number) => void): Compression {
  return {
    name: 'gzip',
    compress: (bytes) =>
      new Promise((resolve, reject) =>
        zlib.gzip(bytes, (err, out) => (err ? reject(err) : resolve(new Uint8Array(out)))),
      ),
    decompress: (bytes, readMaxBytes) => {
      const cap = Math.min(maxBytes, readMaxBytes);
      if (bytes.length === 0) return Promise.resolve(new Uint8Array(0));
      return new Promise((resolve, reject) => {
        const gunzip = zlib.createGunzip({ chunkSize: 16 * 1024 });
        const parts: Buffer[] = [];
        let total = 0;
        let failed = false;
        gunzip.on('data', (chunk: Buffer) => {
          if (failed) return;
          onInflate?.(chunk.length);
          total += chunk.length;
          if (total > cap) {
            failed = true;
            gunzip.destroy();
            reject(new ConnectError('inflated message too large', Code.ResourceExhausted));
            return;
          }
          parts.push(chunk);
        });
        gunzip.once('error', () => {
          if (failed) return;
          failed = true;
          reject(new ConnectError('decompression failed', Code.InvalidArgument));
        });
        gunzip.once('end', () => {
          if (!failed) resolve(new Uint8Array(Buffer.concat(parts, total)));
        });
        gunzip.end(bytes);
      });
    },
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
