import { Code, ConnectError } from '@connectrpc/connect';

/**
 * How a failed call is treated. The question is always "could asking again get a different
 * answer?", and the answer depends on who produced the failure:
 *
 * - `own_cancel`: the agent itself aborted the call (its AbortSignal fired). Never retried.
 * - `transport`: the call never got the control plane's answer — the connection was refused,
 *   reset, closed by a GOAWAY, or dropped mid-call (a killed server's streams end with
 *   RST_STREAM CANCEL, which Connect surfaces as `Canceled`), or the call timed out. Retried
 *   until the caller's deadline, however long the outage: a restarting control plane looks
 *   exactly like this.
 * - `transient`: the control plane answered with a code that may change on its own
 *   (Unavailable, ResourceExhausted, Aborted, Internal, Unknown). Retried; some callers give these
 *   a shorter window than transport failures.
 * - `final`: any other answer (PermissionDenied, Unauthenticated, FailedPrecondition, …). The
 *   server will not change its mind; never retried.
 */
export type FailureKind = 'own_cancel' | 'transport' | 'transient' | 'final';

/** Codes a server answer may carry that can change if asked again. */
const TRANSIENT = new Set<Code>([
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.ResourceExhausted,
  Code.Aborted,
  Code.Internal,
  Code.Unknown,
]);

/**
 * Node error codes that mean the connection, not the server's logic, failed. Connect maps them to
 * Unavailable (refused, unresolvable), Aborted (reset) or Internal (GOAWAY, a destroyed
 * session), keeping the Node error as the cause.
 */
const NETWORK_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ERR_SOCKET_CLOSED',
  'ERR_STREAM_DESTROYED',
  'ERR_STREAM_PREMATURE_CLOSE',
  'ERR_HTTP2_GOAWAY_SESSION',
  'ERR_HTTP2_INVALID_SESSION',
  'ERR_HTTP2_SESSION_ERROR',
  'ERR_HTTP2_STREAM_CANCEL',
  'ERR_HTTP2_STREAM_ERROR',
  'ERR_HTTP2_ERROR',
  'ERR_HTTP2_PING_CANCEL',
  'ERR_HTTP2_SOCKET_UNBOUND',
]);

export function errorCode(err: unknown): Code {
  return ConnectError.from(err).code;
}

/** The code's name ("PermissionDenied"), never the server's message, which we do not control. */
export function codeName(err: unknown): string {
  const code = errorCode(err);
  return Code[code] ?? `code_${code}`;
}

function hasNetworkCause(err: unknown): boolean {
  const seen = new Set<unknown>();
  let cur: unknown = err;
  while (cur instanceof Error && !seen.has(cur)) {
    seen.add(cur);
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_ERROR_CODES.has(code)) return true;
    cur = (cur as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Classifies a failed call. `own` is the AbortSignal the agent passed with the call (if any): a
 * `Canceled` with that signal aborted is the agent's own doing; any other `Canceled` came from the
 * transport (a stream reset by a dying peer) or from a server shutting down, and is retried.
 */
export function classifyFailure(err: unknown, own?: AbortSignal): FailureKind {
  if (own?.aborted) return 'own_cancel';
  const code = errorCode(err);
  if (code === Code.Canceled || code === Code.Unavailable || code === Code.DeadlineExceeded) {
    return 'transport';
  }
  if (hasNetworkCause(err)) return 'transport';
  return TRANSIENT.has(code) ? 'transient' : 'final';
}

export function isTransportFailure(err: unknown, own?: AbortSignal): boolean {
  return classifyFailure(err, own) === 'transport';
}

export function isRetryable(err: unknown, own?: AbortSignal): boolean {
  const kind = classifyFailure(err, own);
  return kind === 'transport' || kind === 'transient';
}

/** 1, 2, 4, 8, 15, 15, … seconds: the report backoff from the reference agent. */
export function backoffMs(attempt: number): number {
  if (attempt < 4) return 1000 * 2 ** attempt;
  return 15_000;
}

/**
 * A wait of `ms` spread over its upper half ([ms/2, ms]), so agents that lost the same replica at
 * the same instant do not all come back to the next one in the same instant.
 */
export function jittered(ms: number, random: () => number = Math.random): number {
  return Math.round(ms / 2 + random() * (ms / 2));
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

export interface RetryOptions {
  /** Absolute epoch-ms after which no new attempt starts. */
  deadline: number;
  /**
   * Absolute epoch-ms after which `transient` answers (a server that answered, with a code that
   * may change) are no longer retried; transport failures keep being retried until `deadline`.
   * Defaults to `deadline`.
   */
  transientDeadline?: number;
  /** The agent's own cancellation: once aborted, the loop stops and nothing is retried. */
  signal?: AbortSignal;
  /**
   * Override the schedule (tests, bootstrap); attempt is 0-based. The default is backoffMs,
   * jittered (each wait drawn from the upper half of its step).
   */
  backoff?: (attempt: number) => number;
  /** Called before each wait; returning false aborts the retry loop. */
  onRetry?: (err: unknown, attempt: number, waitMs: number) => boolean | void;
  now?: () => number;
}

/**
 * Runs `fn` until it succeeds, fails with a code that is not retried, or the deadline passes; the
 * last error is rethrown. Waits never overshoot the deadline (a 15 s step cannot push the agent far
 * past LEOFLOW_REPORT_DEADLINE_MS), and one last attempt is made when a wait lands on it.
 */
export async function retryUntil<T>(fn: () => Promise<T>, opts: RetryOptions): Promise<T> {
  const now = opts.now ?? Date.now;
  const schedule = opts.backoff ?? ((attempt: number) => jittered(backoffMs(attempt)));
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const kind = classifyFailure(err, opts.signal);
      if (kind === 'own_cancel' || kind === 'final') throw err;
      const deadline =
        kind === 'transient'
          ? Math.min(opts.deadline, opts.transientDeadline ?? Infinity)
          : opts.deadline;
      const remaining = deadline - now();
      if (remaining <= 0) throw err;
      const wait = Math.min(schedule(attempt), remaining);
      if (opts.onRetry?.(err, attempt, wait) === false) throw err;
      await sleepUnlessAborted(wait, opts.signal);
      if (opts.signal?.aborted) throw err;
    }
  }
}

function sleepUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return sleep(ms);
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal.addEventListener('abort', done, { once: true });
  });
}
