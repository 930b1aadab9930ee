import { createHash } from 'node:crypto';
import type { UserPrincipal } from './user-token.js';

/** How long a verified signature is remembered; revocation is checked on every request anyway. */
export const USER_TOKEN_CACHE_TTL_MS = 60_000;
const MAX_ENTRIES = 10_000;

interface Entry {
  principal: Readonly<UserPrincipal>;
  untilMs: number;
}

/**
 * Remembers that a user token's signature, audience, issuer and algorithm verified, keyed by the
 * SHA-256 of the token (the cache never holds a usable bearer), for at most a minute and never
 * past the token's own expiry. It saves the Ed25519 verification on repeated requests; whether
 * the token is still on record and unrevoked is NOT cached — the caller asks the store each time.
 */
export class VerifiedUserTokens {
  private readonly entries = new Map<string, Entry>();

  static keyOf(token: string): string {
    return createHash('sha256').update(token).digest('base64url');
  }

  get(key: string, nowMs: number): Readonly<UserPrincipal> | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (!(nowMs < e.untilMs)) {
      this.entries.delete(key);
      return undefined;
    }
    // Map order is recency order: re-insert on use.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.principal;
  }

  set(key: string, principal: UserPrincipal, expiresAtMs: number | null, nowMs: number): void {
    const untilMs = Math.min(expiresAtMs ?? Infinity, nowMs + USER_TOKEN_CACHE_TTL_MS);
    if (!(nowMs < untilMs)) return;
    this.entries.delete(key);
    this.entries.set(key, { principal: Object.freeze({ ...principal }), untilMs });
    if (this.entries.size > MAX_ENTRIES) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }

  get size(): number {
    return this.entries.size;
  }
}
