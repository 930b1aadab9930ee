import { describe, expect, it } from 'vitest';
import {
  USER_TOKEN_CACHE_TTL_MS,
  VerifiedUserTokens,
} from '../../src/auth/verified-user-tokens.js';

const p = { subject: 's', tenant_id: 't', role: 'viewer', jti: 'j' };
const T0 = 1_800_000_000_000;

describe('VerifiedUserTokens', () => {
  it('answers within the TTL and never after it', () => {
    const c = new VerifiedUserTokens();
    c.set('k', p, null, T0);
    expect(c.get('k', T0 + USER_TOKEN_CACHE_TTL_MS - 1)).toEqual(p);
    expect(c.get('k', T0 + USER_TOKEN_CACHE_TTL_MS)).toBeUndefined();
  });

  it("never outlives the token's own expiry", () => {
    const c = new VerifiedUserTokens();
    c.set('k', p, T0 + 5_000, T0);
    expect(c.get('k', T0 + 4_999)).toEqual(p);
    expect(c.get('k', T0 + 5_000)).toBeUndefined();
    c.set('dead', p, T0 - 1, T0);
    expect(c.get('dead', T0)).toBeUndefined();
  });

  it('keys by a hash: the token itself is not what it stores', () => {
    const token = 'aaa.bbb.ccc';
    const key = VerifiedUserTokens.keyOf(token);
    expect(key).not.toContain(token);
    expect(key).toHaveLength(43);
  });
});
