import { Code, ConnectError } from '@connectrpc/connect';

/**
 * Codes that mean "the control plane may answer differently if asked again". Internal and
 * Unknown are included because a dropped HTTP/2 session or a refused TCP connection can surface
 * as either, depending on where the failure happened.
 */
const RETRYABLE = new Set<Code>([
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.ResourceExhausted,
  Code.Aborted,
  Code.Internal,
  Code.Unknown,
]);

export function errorCode(err: unknown): Code {
  return ConnectError.from(err).code;
}

/** The code's name ("PermissionDenied"), never the server's message, which we do not control. */
export function codeName(err: unknown): string {
  const code = errorCode(err);
  return Code[code] ?? `code_${code}`;
}

export function isRetryable(err: unknown): boolean {
  return RETRYABLE.has(errorCode(err));
}

/** 1, 2, 4, 8, 15, 15, … seconds: the report backoff from the reference agent. */
export function backoffMs(attempt: number): number {
  if (attempt < 4) return 1000 * 2 ** attempt;
  return 15_000;
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

export interface RetryOptions {
  /** Absolute epoch-ms after which no new attempt starts. */
  deadline: number;
  /** Override the schedule (tests, bootstrap); attempt is 0-based. */
  backoff?: (attempt: number) => number;
  /** Called before each wait; returning false aborts the retry loop. */
  onRetry?: (err: unknown, attempt: number, waitMs: number) => boolean | void;
  now?: () => number;
}

/**
 * Runs `fn` until it succeeds, fails with a non-retryable code, or the deadline passes; the last
 * error is rethrown. Waits never overshoot the deadline (a 15 s step cannot push the agent far
 * past LEOFLOW_REPORT_DEADLINE_MS), and one last attempt is made when a wait lands on it.
 */
export async function retryUntil<T>(fn: () => Promise<T>, opts: RetryOptions): Promise<T> {
  const now = opts.now ?? Date.now;
  const schedule = opts.backoff ?? backoffMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const remaining = opts.deadline - now();
      if (!isRetryable(err) || remaining <= 0) throw err;
      const wait = Math.min(schedule(attempt), remaining);
      if (opts.onRetry?.(err, attempt, wait) === false) throw err;
      await sleep(wait);
    }
  }
}
