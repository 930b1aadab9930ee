import { hash } from 'node:crypto';
import type { AgentTokenClaims, AgentTokenVerification } from './agent-token.js';

/**
 * ~10k attempts' worth of hot tokens at a few hundred bytes each: a few MB, and far more than the
 * attempts one control plane runs at once (each live attempt uses one token at a time; the
 * tokens it renewed away from go cold and fall out first).
 */
export const DEFAULT_TOKEN_CACHE_ENTRIES = 10_000;

interface Entry {
  claims: Readonly<AgentTokenClaims>;
  expMs: number;
  attempt: string;
}

export interface TokenCacheStats {
  hits: number;
  misses: number;
  size: number;
}

/**
 * A bounded LRU of verified agent-token claims keyed by SHA-256 of the token, so the cache never
 * holds a usable bearer. An entry is honoured only while now < exp (the caller's clock), so a
 * cached token can never outlive its own expiry. Insertion order of the Map is the recency order.
 */
export class VerifiedTokenCache {
  private readonly entries = new Map<string, Entry>();
  private readonly byAttempt = new Map<string, Set<string>>();

  constructor(readonly maxEntries: number = DEFAULT_TOKEN_CACHE_ENTRIES) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) {
      throw new RangeError(
        `token cache size must be a positive integer, got ${String(maxEntries)}`,
      );
    }
  }

  get size(): number {
    return this.entries.size;
  }

  get(hash: string, nowMs: number): Readonly<AgentTokenClaims> | undefined {
    const e = this.entries.get(hash);
    if (!e) return undefined;
    if (!(nowMs < e.expMs)) {
      this.delete(hash, e);
      return undefined;
    }
    // Re-insert to mark as most recently used.
    this.entries.delete(hash);
    this.entries.set(hash, e);
    return e.claims;
  }

  set(hash: string, claims: AgentTokenClaims): void {
    const old = this.entries.get(hash);
    if (old) this.delete(hash, old);
    const attempt = attemptKey(claims.task_instance_id, claims.try_number);
    this.entries.set(hash, {
      claims: Object.freeze({ ...claims }),
      expMs: claims.exp * 1000,
      attempt,
    });
    let set = this.byAttempt.get(attempt);
    if (!set) this.byAttempt.set(attempt, (set = new Set()));
    set.add(hash);
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      const e = this.entries.get(oldest.value);
      if (e) this.delete(oldest.value, e);
    }
  }

  /**
   * Caches a token that supersedes the attempt's others (a renewal): they are dropped, so a
   * live attempt holds one entry, not one per renewal still inside the LRU. With thousands of
   * attempts renewing every heartbeat the superseded ones otherwise crowded out the tokens
   * still to be presented. A dropped token that is presented again simply re-verifies.
   */
  replaceAttempt(hash: string, claims: AgentTokenClaims): void {
    const set = this.byAttempt.get(attemptKey(claims.task_instance_id, claims.try_number));
    if (set) {
      for (const h of [...set]) {
        const e = this.entries.get(h);
        if (h !== hash && e) this.delete(h, e);
      }
    }
    this.set(hash, claims);
  }

  /** Drops every cached token of one attempt; returns how many. */
  evictAttempt(taskInstanceId: string, tryNumber: number): number {
    const attempt = attemptKey(taskInstanceId, tryNumber);
    const set = this.byAttempt.get(attempt);
    if (!set) return 0;
    let n = 0;
    for (const hash of [...set]) {
      const e = this.entries.get(hash);
      if (e) {
        this.delete(hash, e);
        n++;
      }
    }
    this.byAttempt.delete(attempt);
    return n;
  }

  clear(): void {
    this.entries.clear();
    this.byAttempt.clear();
  }

  private delete(hash: string, e: Entry): void {
    this.entries.delete(hash);
    const set = this.byAttempt.get(e.attempt);
    if (set) {
      set.delete(hash);
      if (set.size === 0) this.byAttempt.delete(e.attempt);
    }
  }
}

export interface CachingVerifierOptions {
  maxEntries?: number;
}

/**
 * Agent-token verification for the RPC hot path: a signature is checked once per token, then the
 * verified claims are served from memory until the token's exp. Only successful verifications are
 * cached. Concurrent first uses of one token share a single verification.
 *
 * Eviction is hygiene, not the revocation decision: a token of an evicted attempt simply
 * re-verifies on its next use. Denying a revoked or non-live attempt is the secret RPCs' liveness
 * gate, deliberately not this layer, because Heartbeat and ReportState must keep authenticating a
 * stale attempt so they can tell it to stop.
 */
export class CachingAgentTokenVerifier implements AgentTokenVerification {
  private readonly cache: VerifiedTokenCache;
  private readonly pending = new Map<string, Promise<AgentTokenClaims>>();
  /** Bumped by every eviction so a verification that raced an eviction does not re-insert. */
  private epoch = 0;
  private hits = 0;
  private misses = 0;

  constructor(
    private readonly inner: AgentTokenVerification,
    opts: CachingVerifierOptions = {},
  ) {
    this.cache = new VerifiedTokenCache(opts.maxEntries ?? DEFAULT_TOKEN_CACHE_ENTRIES);
  }

  async verify(token: string, nowMs: number): Promise<AgentTokenClaims> {
    const hash = tokenHash(token);
    const cached = this.cache.get(hash, nowMs);
    if (cached) {
      this.hits++;
      return { ...cached };
    }
    const inflight = this.pending.get(hash);
    if (inflight) {
      this.hits++;
      const claims = await inflight;
      // The shared verification ran at its starter's clock; past exp this caller decides alone.
      if (!(nowMs < claims.exp * 1000)) return this.inner.verify(token, nowMs);
      return { ...claims };
    }
    this.misses++;
    const startEpoch = this.epoch;
    const p = this.inner.verify(token, nowMs);
    this.pending.set(hash, p);
    try {
      const claims = await p;
      if (startEpoch === this.epoch && nowMs < claims.exp * 1000) this.cache.set(hash, claims);
      return { ...claims };
    } finally {
      this.pending.delete(hash);
    }
  }

  /**
   * A token this replica just signed (a heartbeat's renewal), with the claims it signed: served
   * from memory on first use, as if verified, instead of one Ed25519 verify per renewal. The
   * same rules as a verified entry: honoured only before its exp, dropped by evictAttempt and
   * clear(). Not after an eviction that raced the mint (the epoch moved since `epochAtMint`).
   * The attempt's earlier tokens leave the cache (they re-verify if presented again).
   */
  remember(token: string, claims: AgentTokenClaims, nowMs: number, epochAtMint: number): void {
    if (epochAtMint !== this.epoch || !(nowMs < claims.exp * 1000)) return;
    this.cache.replaceAttempt(tokenHash(token), claims);
  }

  /** The eviction epoch, read before a mint whose token `remember` will take. */
  get evictionEpoch(): number {
    return this.epoch;
  }

  /** Past-exp verification is rare (a task whose renewal stopped) and is never cached. */
  async verifyIgnoringExpiry(token: string, nowMs: number): Promise<AgentTokenClaims> {
    if (!this.inner.verifyIgnoringExpiry) return this.verify(token, nowMs);
    return this.inner.verifyIgnoringExpiry(token, nowMs);
  }

  evictAttempt(taskInstanceId: string, tryNumber: number): void {
    this.epoch++;
    this.cache.evictAttempt(taskInstanceId, tryNumber);
  }

  /** Everything, e.g. after an emergency key rotation. */
  clear(): void {
    this.epoch++;
    this.cache.clear();
  }

  stats(): TokenCacheStats {
    return { hits: this.hits, misses: this.misses, size: this.cache.size };
  }
}

/** The cache key: SHA-256 of the whole compact token, base64url. */
export function tokenHash(token: string): string {
  // one-shot: no Hash object per call on the RPC hot path (same digest as createHash)
  return hash('sha256', token, 'base64url');
}

function attemptKey(taskInstanceId: string, tryNumber: number): string {
  return `${taskInstanceId}\u0000${tryNumber}`;
}
