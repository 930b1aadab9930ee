import type http2 from 'node:http2';
import { create, fromBinary, isMessage, toBinary } from '@bufbuild/protobuf';
import type { DescMethodUnary, DescService } from '@bufbuild/protobuf';
import {
  Code,
  ConnectError,
  createContextKey,
  createServiceImplSpec,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type ServiceImpl,
  type UnaryRequest,
  type UnaryResponse,
} from '@connectrpc/connect';
import type { Compression } from '@connectrpc/connect/protocol';
import { parseTimeout, setTrailerStatus } from '@connectrpc/connect/protocol-grpc';

/**
 * The agent port's unary calls, served without Connect's streaming machinery (issue 38).
 *
 * Connect's node adapter runs every call, unary or not, through async-iterable pipelines (split
 * envelopes, decompress, parse, invoke, serialize, compress, join, catch), one promise chain per
 * stage and per chunk; on the agent port that was most of a no-op call's CPU. A unary gRPC call
 * is one length-prefixed message each way, so this path reads the body into one buffer, parses
 * it, runs the SAME interceptors (Connect's Interceptor contract: UnaryRequest in, UnaryResponse
 * out) and the SAME service implementation, and writes headers, one frame and the trailers.
 *
 * Wire-compatible with Connect's gRPC handler: the same response headers (content-type, the
 * gzip negotiation, Connect's compressMinBytes rule for compressing the answer), the same
 * trailers (Connect's own setTrailerStatus writes the status, message and error metadata), the
 * same deadline parsing (Connect's parseTimeout). What it does not take — a compressed request
 * (gzip: the capped inflater lives in Connect's path), JSON, streaming methods, an unknown path or
 * a non-POST — it declines, and the caller hands the request to Connect unchanged.
 */

/** What the handler hands each call's interceptors and implementation. */
export interface GrpcUnaryOptions {
  service: DescService;
  impl: ServiceImpl<DescService>;
  /** applied outermost first, exactly as Connect applies a router's interceptors */
  interceptors: Interceptor[];
  /** per-message cap, on the wire (compressed requests are declined, so also after inflation) */
  readMaxBytes: number;
  /** the response compression Connect would negotiate (gzip here); null: never compress */
  responseCompression: Compression | null;
  /** the per-request context values (what connectNodeAdapter's `contextValues` returns) */
  contextValues: (req: object) => ContextValues;
}

/** Connect's default: a smaller answer is not worth compressing. */
const COMPRESS_MIN_BYTES = 1024;
const CONTENT_TYPE_PROTO = 'application/grpc+proto';

/** The call's state, reached by the innermost `next` through the request's context values. */
interface CallState {
  readonly ctx: LeanHandlerContext;
}
const CALL = createContextKey<CallState | undefined>(undefined, {
  description: 'leoflow lean unary call',
});

/** Whether this call's context came from the lean path (tests check which path served). */
export function servedLean(ctx: Pick<HandlerContext, 'values'>): boolean {
  return ctx.values.get(CALL) !== undefined;
}

interface Route {
  method: DescMethodUnary;
  /** the interceptor chain around the implementation, built once */
  call: (req: UnaryRequest) => Promise<UnaryResponse>;
}

/**
 * Builds the lean unary handler. It returns false, having touched nothing, for any request it
 * does not serve (the caller passes that one to Connect).
 */
export function createGrpcUnaryHandler(
  opts: GrpcUnaryOptions,
): (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => boolean {
  const spec = createServiceImplSpec(opts.service, opts.impl);
  const routes = new Map<string, Route>();
  for (const method of opts.service.methods) {
    if (method.methodKind !== 'unary') continue;
    const implSpec = spec.methods[method.localName];
    if (implSpec?.kind !== 'unary') continue;
    const impl = implSpec.impl;
    const unary = implSpec.method;
    const innermost = async (req: UnaryRequest): Promise<UnaryResponse> => {
      const state = req.contextValues.get(CALL);
      if (!state) throw new ConnectError('lean unary call without its state', Code.Internal);
      const ctx = state.ctx;
      // What Connect's mergeRequest gives the implementation: the context, with the request's
      // own header, signal and values (an interceptor may have replaced them).
      const handlerCtx = ctx.forRequest(req);
      const out: unknown = await impl(req.message, handlerCtx);
      return {
        stream: false,
        service: opts.service,
        method: unary,
        header: ctx.responseHeader,
        trailer: ctx.responseTrailer,
        message: isMessage(out, unary.output) ? out : create(unary.output, out as never),
      };
    };
    type AnyNext = Parameters<Interceptor>[0];
    let call = innermost as AnyNext;
    for (const i of [...opts.interceptors].reverse()) call = i(call);
    routes.set(`/${opts.service.typeName}/${method.name}`, {
      method: unary,
      call: call as (req: UnaryRequest) => Promise<UnaryResponse>,
    });
  }

  return (req, res) => {
    if (req.method !== 'POST') return false;
    const route = routes.get(req.url);
    if (!route) return false;
    const ct = req.headers['content-type'];
    if (ct !== CONTENT_TYPE_PROTO && ct !== 'application/grpc') return false;
    const enc = req.headers['grpc-encoding'];
    if (enc !== undefined && enc !== 'identity') return false;
    void serve(route, req, res, opts);
    return true;
  };
}

async function serve(
  route: Route,
  req: http2.Http2ServerRequest,
  res: http2.Http2ServerResponse,
  opts: GrpcUnaryOptions,
): Promise<void> {
  const { method } = route;
  const ctx = new LeanHandlerContext(method, req, opts.contextValues(req));
  let finished = false;
  res.once('close', () => {
    if (!finished) ctx.abort(new ConnectError('request canceled', Code.Canceled));
  });
  try {
    const timeout = parseTimeout(stringHeader(req, 'grpc-timeout'), Number.MAX_SAFE_INTEGER);
    if (timeout.error) throw timeout.error;
    if (timeout.timeoutMs !== undefined) ctx.deadline(timeout.timeoutMs);
    const body = await readUnaryBody(req, opts.readMaxBytes);
    let input;
    try {
      input = fromBinary(method.input, body);
    } catch (err) {
      throw new ConnectError(
        `parse binary: ${err instanceof Error ? err.message : String(err)}`,
        Code.Internal,
      );
    }
    ctx.values.set(CALL, { ctx });
    const response = await route.call({
      stream: false,
      service: method.parent,
      method,
      requestMethod: 'POST',
      url: ctx.url,
      header: ctx.requestHeader,
      contextValues: ctx.values,
      message: input,
      get signal() {
        return ctx.signal;
      },
    });
    copyHeaders(response.header, ctx.responseHeader);
    copyHeaders(response.trailer, ctx.responseTrailer);
    const message = toBinary(method.output, response.message as never);
    let flags = 0;
    let data: Uint8Array = message;
    const compression = responseCompressionFor(req, opts.responseCompression);
    if (compression) ctx.responseHeader.set('grpc-encoding', compression.name);
    if (compression && message.byteLength >= COMPRESS_MIN_BYTES) {
      data = await compression.compress(message);
      flags = 1;
    }
    const frame = Buffer.allocUnsafe(5 + data.byteLength);
    frame[0] = flags;
    frame.writeUInt32BE(data.byteLength, 1);
    frame.set(data, 5);
    finished = true;
    ctx.abort();
    if (res.destroyed || res.closed) return;
    res.writeHead(200, nodeHeaders(ctx.responseHeader));
    res.addTrailers(nodeHeaders(ctx.responseTrailer));
    res.end(frame);
  } catch (err) {
    finished = true;
    ctx.abort(err);
    const e =
      err instanceof ConnectError
        ? err
        : new ConnectError('internal error', Code.Internal, undefined, undefined, err);
    const compression = responseCompressionFor(req, opts.responseCompression);
    if (compression) ctx.responseHeader.set('grpc-encoding', compression.name);
    setTrailerStatus(ctx.responseTrailer, e);
    if (res.destroyed || res.closed) return;
    if (!res.headersSent) res.writeHead(200, nodeHeaders(ctx.responseHeader));
    res.addTrailers(nodeHeaders(ctx.responseTrailer));
    res.end();
  }
}

/** Connect's negotiation for the answer: the first encoding the caller accepts that we have. */
function responseCompressionFor(
  req: http2.Http2ServerRequest,
  available: Compression | null,
): Compression | null {
  if (!available) return null;
  const accepted = stringHeader(req, 'grpc-accept-encoding');
  if (accepted === null || accepted === '') return null; // the request itself is identity
  for (const name of accepted.split(',')) if (name.trim() === available.name) return available;
  return null;
}

function stringHeader(req: http2.Http2ServerRequest, name: string): string | null {
  const v = req.headers[name];
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(', ') : String(v);
}

/**
 * The request body of a unary call: exactly one uncompressed enveloped message of at most
 * `readMaxBytes`. Rejects as Connect's envelope reader does (sizes as ResourceExhausted, the rest
 * as protocol errors); stops listening at the first violation, leaving the rest of the body to
 * the gate's reset once the answer is out.
 */
function readUnaryBody(req: http2.Http2ServerRequest, readMaxBytes: number): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let want = -1; // bytes of the first envelope (header included), once its header is in
    let settled = false;
    // Listeners stay attached (removing them cost more than the calls they would skip); once
    // settled they ignore what follows, and the gate resets a body still arriving.
    const done = (err: ConnectError | null, body?: Uint8Array): void => {
      if (settled) return;
      settled = true;
      if (err) reject(err);
      else resolve(body as Uint8Array);
    };
    const header = (): Buffer => (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total));
    const onData = (chunk: Buffer): void => {
      if (settled) return;
      chunks.push(chunk);
      total += chunk.length;
      if (want < 0 && total >= 5) {
        const h = header();
        const len = h.readUInt32BE(1);
        if (len > readMaxBytes) {
          done(
            new ConnectError(
              `message size ${len} is larger than configured readMaxBytes ${readMaxBytes}`,
              Code.ResourceExhausted,
            ),
          );
          return;
        }
        if ((h[0]! & 1) === 1) {
          done(new ConnectError('received compressed envelope, but no encoding', Code.Internal));
          return;
        }
        want = 5 + len;
      }
      if (want >= 0 && total > want) {
        done(
          new ConnectError(
            'protocol error: received extra input message for unary method',
            Code.Unimplemented,
          ),
        );
      }
    };
    const onEnd = (): void => {
      if (settled) return;
      if (total === 0) {
        done(
          new ConnectError(
            'protocol error: missing input message for unary method',
            Code.Unimplemented,
          ),
        );
        return;
      }
      if (want < 0 || total < want) {
        done(
          new ConnectError(
            `protocol error: promised ${want < 0 ? 5 : want - 5} bytes in enveloped message, got ${Math.max(0, total - 5)} bytes`,
            Code.InvalidArgument,
          ),
        );
        return;
      }
      const all = header();
      done(null, all.subarray(5, want));
    };
    const onError = (err: unknown): void =>
      done(
        new ConnectError(
          `request body: ${err instanceof Error ? err.message : String(err)}`,
          Code.Canceled,
        ),
      );
    const onAborted = (): void => done(new ConnectError('request canceled', Code.Canceled));
    req.on('data', onData);
    req.once('end', onEnd);
    req.on('error', onError);
    req.once('aborted', onAborted);
  });
}

/**
 * The HandlerContext Connect's createHandlerContext would build, without its per-call costs that
 * a unary agent call never uses: the abort signal is made on first use (or when a deadline is
 * set), the request's Headers from the HTTP/2 headers once.
 */
class LeanHandlerContext implements HandlerContext {
  readonly service: DescService;
  readonly requestMethod = 'POST';
  readonly protocolName = 'grpc';
  readonly url: string;
  readonly requestHeader: Headers;
  readonly responseHeader: Headers;
  readonly responseTrailer: Headers;
  readonly values: ContextValues;
  #controller: AbortController | undefined;
  #deadlineAt: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  #aborted = false;

  constructor(
    readonly method: DescMethodUnary,
    req: http2.Http2ServerRequest,
    values: ContextValues,
  ) {
    this.service = method.parent;
    const encrypted =
      'encrypted' in req.socket && (req.socket as { encrypted?: boolean }).encrypted;
    this.url = `${encrypted ? 'https' : 'http'}://${req.authority}${req.url}`;
    this.requestHeader = LiteHeaders.fromNode(req.headers);
    this.responseHeader = new LiteHeaders([['content-type', CONTENT_TYPE_PROTO]]);
    this.responseTrailer = new LiteHeaders([['grpc-status', '0']]);
    this.values = values;
  }

  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    if (this.#aborted && !this.#controller.signal.aborted) this.#controller.abort();
    return this.#controller.signal;
  }

  timeoutMs(): number | undefined {
    return this.#deadlineAt === undefined ? undefined : this.#deadlineAt - Date.now();
  }

  deadline(ms: number): void {
    this.#deadlineAt = Date.now() + ms;
    this.#timer = setTimeout(
      () => this.abort(new ConnectError('the operation timed out', Code.DeadlineExceeded)),
      ms,
    );
    this.#timer.unref();
  }

  abort(reason?: unknown): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#aborted) return;
    this.#aborted = true;
    this.#controller?.abort(reason);
  }

  /** The context the implementation sees for (a possibly interceptor-replaced) request. */
  forRequest(req: UnaryRequest): HandlerContext {
    const timeoutMs = () => this.timeoutMs();
    return {
      method: this.method,
      service: req.service,
      requestMethod: this.requestMethod,
      protocolName: this.protocolName,
      url: this.url,
      requestHeader: req.header,
      responseHeader: this.responseHeader,
      responseTrailer: this.responseTrailer,
      values: req.contextValues,
      timeoutMs,
      get signal() {
        return req.signal;
      },
    };
  }
}

/**
 * A Headers for one call, without undici's per-instance cost (building a WHATWG Headers from a
 * request's eight or so headers took more CPU than the rest of a no-op call's framing). Same
 * behaviour where callers can see it: names case-insensitive, `get` joins repeated values with
 * ", " and answers null when absent, iteration in sorted name order. A request's headers are
 * read straight from the HTTP/2 header object (pseudo-headers left out) until first written.
 */
export class LiteHeaders implements Headers {
  #map: Map<string, string[]> | undefined;
  #raw: http2.IncomingHttpHeaders | undefined;

  constructor(init?: Iterable<readonly [string, string]>) {
    if (init) {
      this.#map = new Map();
      for (const [k, v] of init) this.append(k, v);
    }
  }

  static fromNode(raw: http2.IncomingHttpHeaders): LiteHeaders {
    const h = new LiteHeaders();
    h.#raw = raw;
    return h;
  }

  #own(): Map<string, string[]> {
    if (this.#map) return this.#map;
    const map = new Map<string, string[]>();
    const raw = this.#raw;
    this.#raw = undefined;
    if (raw) {
      for (const k in raw) {
        if (k.charCodeAt(0) === 58 /* ':' */) continue;
        const v = raw[k];
        if (v === undefined) continue;
        map.set(k.toLowerCase(), Array.isArray(v) ? [...v] : [String(v)]);
      }
    }
    this.#map = map;
    return map;
  }

  get(name: string): string | null {
    const k = name.toLowerCase();
    if (this.#raw) {
      if (k.charCodeAt(0) === 58) return null;
      const v = this.#raw[k];
      if (v === undefined) return null;
      return Array.isArray(v) ? v.join(', ') : String(v);
    }
    const v = this.#map?.get(k);
    return v === undefined ? null : v.join(', ');
  }

  has(name: string): boolean {
    return this.get(name) !== null;
  }

  set(name: string, value: string): void {
    this.#own().set(name.toLowerCase(), [String(value)]);
  }

  append(name: string, value: string): void {
    const map = this.#own();
    const k = name.toLowerCase();
    const v = map.get(k);
    if (v) v.push(String(value));
    else map.set(k, [String(value)]);
  }

  delete(name: string): void {
    this.#own().delete(name.toLowerCase());
  }

  getSetCookie(): string[] {
    return [...(this.#own().get('set-cookie') ?? [])];
  }

  forEach(cb: (value: string, key: string, parent: Headers) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) cb.call(thisArg, v, k, this);
  }

  *entries(): ReturnType<Headers['entries']> {
    const map = this.#own();
    for (const k of [...map.keys()].sort()) yield [k, map.get(k)!.join(', ')];
  }

  *keys(): ReturnType<Headers['keys']> {
    for (const [k] of this.entries()) yield k;
  }

  *values(): ReturnType<Headers['values']> {
    for (const [, v] of this.entries()) yield v;
  }

  [Symbol.iterator](): ReturnType<Headers['entries']> {
    return this.entries();
  }
}

function copyHeaders(from: Headers, to: Headers): void {
  if (from === to) return;
  for (const k of [...to.keys()]) to.delete(k);
  from.forEach((v, k) => to.set(k, v));
}

function nodeHeaders(h: Headers): http2.OutgoingHttpHeaders {
  const out: http2.OutgoingHttpHeaders = {};
  h.forEach((v, k) => {
    out[k] = v;
  });
  return out;
}
