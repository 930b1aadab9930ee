import { isIP } from 'node:net';
import type { Clock } from '@leoflow/core';
import type { FastifyRequest } from 'fastify';

/** Failed sign-ins one source may make per window before it is throttled. */
export const DEFAULT_SIGN_IN_FAILURES = 10;
/** The window: counted from a source's first failure in it. */
export const DEFAULT_SIGN_IN_WINDOW_MS = 15 * 60_000;
/** Sources remembered at most (a flood of addresses cannot grow memory without bound). */
const MAX_SOURCES = 10_000;

interface Failures {
  count: number;
  windowEnds: number;
}

/**
 * Throttles failed web app sign-ins (a wrong API token, a spent or unknown one-time code) per
 * source address. Once a source has failed `maxFailures` times in a window, every sign-in from
 * it — right or wrong — is refused until the window ends, before the token or code is looked at
 * (so a throttled guess learns nothing and spends no code). Successes are not counted and do
 * not reset the count. In memory: a restart forgets the counts, which costs an attacker a
 * restart they cannot cause.
 */
export class SignInThrottle {
  private readonly failures = new Map<string, Failures>();

  constructor(
    private readonly clock: Clock,
    private readonly limits = {
      maxFailures: DEFAULT_SIGN_IN_FAILURES,
      windowMs: DEFAULT_SIGN_IN_WINDOW_MS,
    },
  ) {}

  /** Seconds until `source` may try again, or 0 when it may try now. */
  retryAfterSeconds(source: string): number {
    const f = this.failures.get(source);
    const now = this.clock.now();
    if (!f) return 0;
    if (now >= f.windowEnds) {
      this.failures.delete(source);
      return 0;
    }
    return f.count >= this.limits.maxFailures ? Math.ceil((f.windowEnds - now) / 1000) : 0;
  }

  recordFailure(source: string): void {
    const now = this.clock.now();
    const f = this.failures.get(source);
    if (f && now < f.windowEnds) {
      f.count += 1;
      return;
    }
    if (this.failures.size >= MAX_SOURCES) this.prune(now);
    this.failures.set(source, { count: 1, windowEnds: now + this.limits.windowMs });
  }

  private prune(now: number): void {
    for (const [k, v] of this.failures) if (now >= v.windowEnds) this.failures.delete(k);
    // Still full: forget the oldest entries (Map keeps insertion order).
    for (const k of this.failures.keys()) {
      if (this.failures.size < MAX_SOURCES) break;
      this.failures.delete(k);
    }
  }
}

/**
 * The address a sign-in comes from: the TCP peer, never a header — unless the peer is one of
 * `trustedProxies` (LEOFLOW_UI_TRUSTED_PROXIES), whose X-Forwarded-For then names the client
 * (its last entry: the address that proxy itself saw). A header from anyone else is ignored.
 */
export function signInSource(req: FastifyRequest, trustedProxies: readonly string[]): string {
  const peer = normaliseAddress(req.socket.remoteAddress ?? 'unknown');
  if (!trustedProxies.includes(peer)) return peer;
  const forwarded = req.headers['x-forwarded-for'];
  const list = (Array.isArray(forwarded) ? forwarded.join(',') : (forwarded ?? '')).split(',');
  const last = normaliseAddress(list[list.length - 1]?.trim() ?? '');
  return isIP(last) !== 0 ? last : peer;
}

/** `::ffff:127.0.0.1` and `127.0.0.1` are one source. */
export function normaliseAddress(a: string): string {
  const lower = a.trim().toLowerCase();
  return lower.startsWith('::ffff:') && isIP(lower.slice(7)) === 4 ? lower.slice(7) : lower;
}
