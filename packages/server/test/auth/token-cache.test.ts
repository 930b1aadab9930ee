import { beforeAll, describe, expect, it } from 'vitest';
import {
  AgentTokenIssuer,
  type AgentTokenClaims,
  type AgentTokenVerification,
  type AttemptIdentity,
} from '../../src/auth/agent-token.js';
import { loadSigningKeyring } from '../../src/auth/signing-keys.js';
import {
  CachingAgentTokenVerifier,
  DEFAULT_TOKEN_CACHE_ENTRIES,
  VerifiedTokenCache,
  tokenHash,
} from '../../src/auth/token-cache.js';
import { MIN, T0, identity, useTempDirs } from './fixtures.js';

const tempDir = useTempDirs();
const TTL = 600;
const EXP = T0 + TTL * 1000;

/** Counts signature verifications reaching the real verifier. */
class CountingVerifier implements AgentTokenVerification {
  calls = 0;
  constructor(private readonly inner: AgentTokenVerification) {}
  verify(token: string, nowMs: number): Promise<AgentTokenClaims> {
    this.calls++;
    return this.inner.verify(token, nowMs);
  }
}

let issuer: AgentTokenIssuer;
let strictIssuer: AgentTokenIssuer;
beforeAll(async () => {
  const ring = await loadSigningKeyring(tempDir(), 'agent', { nowMs: T0 });
  issuer = new AgentTokenIssuer(ring, TTL);
  strictIssuer = new AgentTokenIssuer(ring, TTL, { clockToleranceSeconds: 0 });
});

const attempt = (n: number, tryNumber = 1): AttemptIdentity => ({
  ...identity,
  task_instance_id: `ti-${n}`,
  try_number: tryNumber,
});

function setup(inner: AgentTokenVerification = strictIssuer, maxEntries?: number) {
  const counting = new CountingVerifier(inner);
  const cache = new CachingAgentTokenVerifier(counting, maxEntries ? { maxEntries } : {});
  return { counting, cache };
}

describe('CachingAgentTokenVerifier', () => {
  it('verifies a signature once, then serves the token from memory until exp', async () => {
    const { counting, cache } = setup();
    const token = await strictIssuer.mint(identity, T0);
    for (const now of [T0, T0 + 1, T0 + MIN, T0 + 9 * MIN, EXP - 1]) {
      // Availability: a live token always resolves, at every point of its life.
      await expect(cache.verify(token, now)).resolves.toMatchObject({ task_instance_id: 'ti-1' });
    }
    expect(counting.calls).toBe(1);
    expect(cache.stats()).toEqual({ hits: 4, misses: 1, size: 1 });
  });

  it('never answers from the cache at or after exp (advancing the clock)', async () => {
    const { counting, cache } = setup();
    const token = await strictIssuer.mint(identity, T0);
    await cache.verify(token, T0);
    // Security: at exp the entry is dropped and the real verifier says expired.
    await expect(cache.verify(token, EXP)).rejects.toMatchObject({ reason: 'expired' });
    await expect(cache.verify(token, EXP + MIN)).rejects.toMatchObject({ reason: 'expired' });
    expect(counting.calls).toBe(3);
    expect(cache.stats().size).toBe(0);
  });

  it('with a tolerant verifier, a token inside the tolerance re-verifies and is not re-cached', async () => {
    const { counting, cache } = setup(issuer);
    const token = await issuer.mint(identity, T0);
    await cache.verify(token, T0);
    await expect(cache.verify(token, EXP + 1000)).resolves.toBeDefined();
    await expect(cache.verify(token, EXP + 2000)).resolves.toBeDefined();
    expect(counting.calls).toBe(3);
    expect(cache.stats().size).toBe(0);
    await expect(cache.verify(token, EXP + 5000)).rejects.toMatchObject({ reason: 'expired' });
  });

  it('never caches a token with a bad signature', async () => {
    const { counting, cache } = setup();
    const token = await strictIssuer.mint(identity, T0);
    const [h, p, s = ''] = token.split('.');
    const flipped = `${h}.${p}.${s.slice(0, -2)}${s.endsWith('AA') ? 'BB' : 'AA'}`;
    for (let i = 0; i < 3; i++) {
      await expect(cache.verify(flipped, T0)).rejects.toMatchObject({ reason: 'invalid' });
    }
    expect(counting.calls).toBe(3);
    expect(cache.stats()).toEqual({ hits: 0, misses: 3, size: 0 });
    // …and the valid token it was forged from still verifies normally.
    await expect(cache.verify(token, T0)).resolves.toBeDefined();
  });

  it('an evicted attempt re-verifies; other attempts stay cached', async () => {
    const { counting, cache } = setup();
    const t1 = await strictIssuer.mint(attempt(1), T0);
    const t1b = await strictIssuer.mint(attempt(1), T0 + 1000); // a renewal of the same attempt
    const t2 = await strictIssuer.mint(attempt(2), T0);
    const t1try2 = await strictIssuer.mint(attempt(1, 2), T0);
    for (const t of [t1, t1b, t2, t1try2]) await cache.verify(t, T0 + 1000);
    expect(counting.calls).toBe(4);

    cache.evictAttempt('ti-1', 1);
    expect(cache.stats().size).toBe(2);
    await cache.verify(t1, T0 + 2000);
    await cache.verify(t1b, T0 + 2000);
    expect(counting.calls).toBe(6);
    await cache.verify(t2, T0 + 2000);
    await cache.verify(t1try2, T0 + 2000);
    expect(counting.calls).toBe(6);
  });

  it('an eviction racing an in-flight verification wins: the result is not cached', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow: AgentTokenVerification = {
      verify: async (token, now) => {
        await gate;
        return strictIssuer.verify(token, now);
      },
    };
    const { counting, cache } = setup(slow);
    const token = await strictIssuer.mint(identity, T0);
    const pending = cache.verify(token, T0);
    cache.evictAttempt('ti-1', 1);
    release();
    await expect(pending).resolves.toBeDefined();
    expect(cache.stats().size).toBe(0);
    await cache.verify(token, T0);
    expect(counting.calls).toBe(2);
  });

  it('concurrent first uses of one token share a single verification', async () => {
    const { counting, cache } = setup();
    const token = await strictIssuer.mint(identity, T0);
    const all = await Promise.all(Array.from({ length: 20 }, () => cache.verify(token, T0)));
    expect(counting.calls).toBe(1);
    expect(new Set(all.map((c) => c.task_instance_id))).toEqual(new Set(['ti-1']));
  });

  it('concurrent uses of a bad token all fail and nothing is cached', async () => {
    const { cache } = setup();
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, () => cache.verify('x.y.z', T0)),
    );
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    expect(cache.stats().size).toBe(0);
  });

  it('hands out copies: a caller mutating its claims cannot poison the cache', async () => {
    const { cache } = setup();
    const token = await strictIssuer.mint(identity, T0);
    const first = await cache.verify(token, T0);
    first.tenant_id = 'evil';
    first.exp = Number.MAX_SAFE_INTEGER;
    const second = await cache.verify(token, T0 + 1);
    expect(second.tenant_id).toBe('acme');
    expect(second.exp).toBe(EXP / 1000);
  });

  it('holds its LRU bound and drops the least recently used token first', async () => {
    const { counting, cache } = setup(strictIssuer, 3);
    const tokens = await Promise.all([1, 2, 3, 4].map((n) => strictIssuer.mint(attempt(n), T0)));
    const [a, b, c, d] = tokens as [string, string, string, string];
    await cache.verify(a, T0);
    await cache.verify(b, T0);
    await cache.verify(c, T0);
    await cache.verify(a, T0 + 1); // a is now the most recent; b the least
    await cache.verify(d, T0 + 2); // evicts b
    expect(cache.stats().size).toBe(3);
    const calls = counting.calls;
    await cache.verify(a, T0 + 3);
    await cache.verify(c, T0 + 3);
    await cache.verify(d, T0 + 3);
    expect(counting.calls).toBe(calls);
    await cache.verify(b, T0 + 3);
    expect(counting.calls).toBe(calls + 1);
    expect(cache.stats().size).toBe(3);
  });

  it('clear() forgets everything', async () => {
    const { counting, cache } = setup();
    const token = await strictIssuer.mint(identity, T0);
    await cache.verify(token, T0);
    cache.clear();
    await cache.verify(token, T0);
    expect(counting.calls).toBe(2);
  });
});

describe('VerifiedTokenCache', () => {
  const claims = (n: number, exp = EXP / 1000): AgentTokenClaims => ({
    ...attempt(n),
    map_index: -1,
    dispatch_gen: 0,
    iat: T0 / 1000,
    exp,
    oiat: T0 / 1000,
  });

  it('defaults to 10,000 entries and never exceeds its bound', () => {
    expect(DEFAULT_TOKEN_CACHE_ENTRIES).toBe(10_000);
    const cache = new VerifiedTokenCache(50);
    for (let i = 0; i < 500; i++) {
      cache.set(`h${i}`, claims(i));
      expect(cache.size).toBeLessThanOrEqual(50);
    }
    expect(cache.get('h499', T0)).toBeDefined();
    expect(cache.get('h0', T0)).toBeUndefined();
    // Eviction by attempt still finds survivors and ignores the evicted.
    expect(cache.evictAttempt('ti-499', 1)).toBe(1);
    expect(cache.evictAttempt('ti-0', 1)).toBe(0);
  });

  it('keys by a SHA-256 of the token: the bearer itself is never stored', () => {
    expect(tokenHash('abc')).toBe('ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0');
    expect(tokenHash('abc')).not.toContain('abc');
  });

  it('refuses a nonsensical size', () => {
    expect(() => new VerifiedTokenCache(0)).toThrow();
    expect(() => new VerifiedTokenCache(1.5)).toThrow();
  });
});

describe('a renewed token remembered at mint (issue 38)', () => {
  it('is served from memory on first use with exactly the claims verifying it would give', async () => {
    const { counting, cache } = setup();
    for (const id of [attempt(7), { ...attempt(8, 3), map_index: 2, dispatch_gen: 4 }]) {
      const first = await strictIssuer.verify(await strictIssuer.mint(id, T0), T0);
      const epoch = cache.evictionEpoch;
      const r = await strictIssuer.renew(first, T0 + MIN, 24 * 60 * MIN);
      if (!('token' in r)) throw new Error('no renewal');
      expect(r.claims).toEqual(await strictIssuer.verify(r.token, T0 + MIN));
      cache.remember(r.token, r.claims, T0 + MIN, epoch);
      const before = counting.calls;
      await expect(cache.verify(r.token, T0 + MIN + 1)).resolves.toEqual(r.claims);
      expect(counting.calls).toBe(before);
    }
  });

  it('not across an eviction that raced the mint, not past exp, and an eviction drops it', async () => {
    const { counting, cache } = setup();
    const claims = await strictIssuer.verify(await strictIssuer.mint(attempt(9), T0), T0);
    const renew = async (at: number) => {
      const r = await strictIssuer.renew(claims, at, 24 * 60 * MIN);
      if (!('token' in r)) throw new Error('no renewal');
      return r;
    };
    // an eviction between the epoch read and the mint: not remembered
    const epoch = cache.evictionEpoch;
    cache.evictAttempt('ti-9', 1);
    const raced = await renew(T0 + 1_000);
    cache.remember(raced.token, raced.claims, T0 + 1_000, epoch);
    await cache.verify(raced.token, T0 + 1_000);
    expect(counting.calls).toBe(1);
    // remembered, then the attempt is evicted: verified again
    const kept = await renew(T0 + 2_000);
    cache.remember(kept.token, kept.claims, T0 + 2_000, cache.evictionEpoch);
    await cache.verify(kept.token, T0 + 2_000);
    expect(counting.calls).toBe(1);
    cache.evictAttempt('ti-9', 1);
    await cache.verify(kept.token, T0 + 2_000);
    expect(counting.calls).toBe(2);
    // remembered at or after its own exp: nothing stored
    const late = await renew(T0 + 3_000);
    cache.remember(late.token, late.claims, late.claims.exp * 1000, cache.evictionEpoch);
    expect(cache.stats().size).toBe(1); // kept, verified again after the eviction
    await expect(cache.verify(late.token, late.claims.exp * 1000)).rejects.toThrow();
  });
});

describe('a renewal supersedes the attempt’s cached tokens (issue 38)', () => {
  it('one entry per attempt: the earlier token re-verifies if presented again, others stay', async () => {
    const { counting, cache } = setup();
    const old = await strictIssuer.mint(attempt(11), T0);
    const other = await strictIssuer.mint(attempt(12), T0);
    const claims = await cache.verify(old, T0);
    await cache.verify(other, T0);
    expect(counting.calls).toBe(2);
    const r = await strictIssuer.renew(claims, T0 + 1_000, 24 * 60 * MIN);
    if (!('token' in r)) throw new Error('no renewal');
    cache.remember(r.token, r.claims, T0 + 1_000, cache.evictionEpoch);
    expect(cache.stats().size).toBe(2); // the renewed token and the other attempt's
    await cache.verify(r.token, T0 + 1_000);
    await cache.verify(other, T0 + 1_000);
    expect(counting.calls).toBe(2);
    await expect(cache.verify(old, T0 + 1_000)).resolves.toMatchObject({
      task_instance_id: 'ti-11',
    });
    expect(counting.calls).toBe(3);
  });
});
