import type { DescMessage, DescMethodStreaming, DescMethodUnary } from '@bufbuild/protobuf';
import type {
  ContextValues,
  Interceptor,
  StreamResponse,
  Transport,
  UnaryResponse,
} from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { classifyFailure } from './retry.js';

/**
 * LEOFLOW_AGENT_URL: one URL, or several separated by commas (every control-plane replica's
 * agent URL, or one address in front of them all). Empty items are dropped and duplicates kept
 * once; the order is the order an agent tries them in.
 */
export function parseAgentUrls(text: string): string[] {
  return [
    ...new Set(
      text
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    ),
  ];
}

/** The HTTP/2 keepalive every agent connection uses. */
const SESSION_OPTIONS = {
  // Notice a dead control plane between heartbeats instead of on the next call's timeout.
  pingIntervalMs: 30_000,
  pingTimeoutMs: 10_000,
};

/** One URL of the list and the HTTP/2 session to it (dialled on first use, again after a drop). */
export interface Endpoint {
  readonly url: string;
  readonly index: number;
  readonly sessions: Http2SessionManager;
}

/**
 * The control plane as an agent sees it: a list of agent URLs, one of them current. Every call
 * goes to the current one; a call that fails for a transport reason (the replica is gone,
 * refuses, resets, answers Unavailable because it drains, or stays silent past the call's
 * timeout) moves the current endpoint to the next URL, so the caller's retry — which already
 * waits with backoff and jitter — reaches another replica. Nothing else changes for the caller:
 * an attempt's reports, logs and heartbeats carry on there under the same token and session
 * key, which every replica accepts (the try fences a superseded attempt; liveness is a row in
 * the store). With one URL this is exactly one HTTP/2 session manager, as before.
 */
export class AgentEndpoints {
  readonly #endpoints: Endpoint[];
  #current = 0;
  readonly #onSwitch: ((from: string, to: string, why: string) => void) | undefined;

  constructor(
    urls: readonly string[],
    opts: {
      onSwitch?: (from: string, to: string, why: string) => void;
      /** a transport of its own per URL (the runner's door); default: HTTP/2 to the URL */
      sessions?: (url: string) => Http2SessionManager;
    } = {},
  ) {
    if (urls.length === 0) throw new Error('AgentEndpoints needs at least one URL');
    this.#endpoints = urls.map((url, index) => ({
      url,
      index,
      sessions: opts.sessions?.(url) ?? new Http2SessionManager(url, SESSION_OPTIONS),
    }));
    this.#onSwitch = opts.onSwitch;
  }

  get urls(): string[] {
    return this.#endpoints.map((e) => e.url);
  }

  get current(): Endpoint {
    return this.#endpoints[this.#current]!;
  }

  get all(): readonly Endpoint[] {
    return this.#endpoints;
  }

  /**
   * The call made through `endpoint` failed for a transport reason: the next call goes to the
   * next URL. Many calls in flight fail together when a replica dies; only the first moves the
   * current endpoint (the others name one that is no longer current), so a burst of failures
   * never skips a live replica.
   */
  failed(endpoint: Endpoint, why: string): void {
    if (endpoint.index !== this.#current || this.#endpoints.length === 1) return;
    this.#advance(why);
  }

  /**
   * Leave an endpoint now (a warm worker told by a replica that it does not lead, or whose
   * stream broke): its session is dropped, and the next call dials the next URL.
   */
  moveOn(why: string, from: Endpoint = this.current): void {
    from.sessions.abort();
    // A failure of a call through `from` may have moved the current endpoint on already.
    if (from.index === this.#current && this.#endpoints.length > 1) this.#advance(why);
  }

  /** Drops every session (the process is done with the control plane). */
  close(): void {
    for (const e of this.#endpoints) e.sessions.abort();
  }

  #advance(why: string): void {
    const from = this.current.url;
    this.#current = (this.#current + 1) % this.#endpoints.length;
    this.#onSwitch?.(from, this.current.url, why);
  }
}

/**
 * A Connect transport over AgentEndpoints: each call goes to the current endpoint through a gRPC
 * transport of its own (with the given interceptors, built per endpoint so each can drop its own
 * session), and a transport failure of the call or of a stream's messages moves the endpoints on.
 * The failure is still the caller's to retry: this never sends a request twice by itself.
 */
export function failoverTransport(
  endpoints: AgentEndpoints,
  interceptors: (endpoint: Endpoint) => Interceptor[],
): Transport {
  const transports = new Map<number, Transport>();
  const transportOf = (e: Endpoint): Transport => {
    let t = transports.get(e.index);
    if (t === undefined) {
      t = createGrpcTransport({
        baseUrl: e.url,
        sessionManager: e.sessions,
        interceptors: interceptors(e),
      });
      transports.set(e.index, t);
    }
    return t;
  };
  const noteFailure = (e: Endpoint, err: unknown, signal: AbortSignal | undefined): void => {
    if (classifyFailure(err, signal) === 'transport') {
      endpoints.failed(e, err instanceof Error ? err.message : String(err));
    }
  };
  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: Parameters<Transport['unary']>[3],
      input: Parameters<Transport['unary']>[4],
      contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      const e = endpoints.current;
      try {
        return await transportOf(e).unary(
          method,
          signal,
          timeoutMs,
          header,
          input as never,
          contextValues,
        );
      } catch (err) {
        noteFailure(e, err, signal);
        throw err;
      }
    },
    async stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: Parameters<Transport['stream']>[3],
      input: Parameters<Transport['stream']>[4],
      contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      const e = endpoints.current;
      let res: StreamResponse<I, O>;
      try {
        res = await transportOf(e).stream(
          method,
          signal,
          timeoutMs,
          header,
          input as never,
          contextValues,
        );
      } catch (err) {
        noteFailure(e, err, signal);
        throw err;
      }
      const messages = res.message;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* messages;
          } catch (err) {
            noteFailure(e, err, signal);
            throw err;
          }
        })(),
      };
    },
  };
}
