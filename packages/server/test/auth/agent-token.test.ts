import { createHmac } from 'node:crypto';
import { agentTokenTtlSeconds } from '@leoflow/core';
import { decodeJwt, decodeProtectedHeader, generateKeyPair, SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  AGENT_AUDIENCE,
  AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS,
  AgentTokenIssuer,
  AgentTokenVerifier,
  TOKEN_ISSUER,
  type AgentTokenClaims,
} from '../../src/auth/agent-token.js';
import {
  loadSigningKeyring,
  VerifyOnlyKeyring,
  type FileSigningKeyring,
} from '../../src/auth/signing-keys.js';
import { UserTokenIssuer } from '../../src/auth/user-token.js';
import { HOUR, MIN, T0, identity, useTempDirs } from './fixtures.js';

const tempDir = useTempDirs();
const TTL = agentTokenTtlSeconds(15);
const CEILING = 24 * HOUR;

let dir: string;
let agentRing: FileSigningKeyring;
let userRing: FileSigningKeyring;
let issuer: AgentTokenIssuer;

beforeAll(async () => {
  dir = tempDir();
  agentRing = await loadSigningKeyring(dir, 'agent', { nowMs: T0 });
  userRing = await loadSigningKeyring(dir, 'user', { nowMs: T0 });
  issuer = new AgentTokenIssuer(agentRing, TTL);
});

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const identityOf = (c: AgentTokenClaims) => ({
  tenant_id: c.tenant_id,
  dag_id: c.dag_id,
  dag_run_id: c.dag_run_id,
  run_id: c.run_id,
  task_id: c.task_id,
  try_number: c.try_number,
  task_instance_id: c.task_instance_id,
});
function agentPayload(nowMs: number, over: Record<string, unknown> = {}) {
  const iat = Math.floor(nowMs / 1000);
  return {
    tid: 'acme',
    dag: 'etl',
    drid: 'dr-1',
    run: 'run-1',
    task: 'extract',
    try: 1,
    ti: 'ti-1',
    oiat: iat,
    iss: TOKEN_ISSUER,
    aud: AGENT_AUDIENCE,
    sub: 'attempt:ti-1:1',
    iat,
    exp: iat + TTL,
    ...over,
  };
}
async function signWithAgentKey(
  payload: Record<string, unknown>,
  header: Record<string, unknown> = {},
) {
  const key = agentRing.current();
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: 'JWT', ...header })
    .sign(key.privateKey);
}

describe('mint / verify (T01)', () => {
  it('round-trips every claim, with kid, issuer, audience and the derived TTL', async () => {
    const token = await issuer.mint(identity, T0);
    const claims = await issuer.verify(token, T0 + 1000);
    expect(identityOf(claims)).toEqual(identity);
    expect(claims).toMatchObject({ iat: T0 / 1000, exp: T0 / 1000 + 600, oiat: T0 / 1000 });
    expect(decodeProtectedHeader(token)).toEqual({
      alg: 'EdDSA',
      kid: agentRing.current().kid,
      typ: 'JWT',
    });
    const raw = decodeJwt(token);
    expect(raw).toMatchObject({ iss: 'leoflow', aud: 'leoflow-agent', sub: 'attempt:ti-1:1' });
    expect(Object.keys(raw).sort()).toEqual(
      [
        'aud',
        'dag',
        'drid',
        'exp',
        'gen',
        'iat',
        'iss',
        'oiat',
        'run',
        'sub',
        'task',
        'tid',
        'ti',
        'try',
      ].sort(),
    );
  });

  it('uses agentTokenTtlSeconds(heartbeat): 4 × a long interval', async () => {
    const long = new AgentTokenIssuer(agentRing, agentTokenTtlSeconds(3600));
    const c = await long.verify(await long.mint(identity, T0), T0);
    expect(c.exp - c.iat).toBe(4 * 3600);
  });

  it('keeps a given oiat', async () => {
    const c = await issuer.verify(await issuer.mint(identity, T0, T0 / 1000 - 3600), T0);
    expect(c.oiat).toBe(T0 / 1000 - 3600);
  });

  it('accepts a bare SigningKey for older callers', async () => {
    const legacy = new AgentTokenIssuer(agentRing.current(), TTL);
    await expect(issuer.verify(await legacy.mint(identity, T0), T0)).resolves.toBeDefined();
  });

  it('refuses a user-purpose keyring and a non-positive TTL', () => {
    expect(() => new AgentTokenIssuer(userRing, TTL)).toThrow(/agent keyring/);
    expect(() => new AgentTokenIssuer(agentRing, 0)).toThrow(/TTL/);
  });
});

describe('audience separation (T02)', () => {
  it('an agent token is refused by the user verifier, a user token by the agent verifier', async () => {
    const users = new UserTokenIssuer(userRing);
    const agentToken = await issuer.mint(identity, T0);
    expect(await users.verify(agentToken, T0)).toBeNull();
    const { token: userToken } = await users.mint(
      { subject: 'admin', tenant_id: 'acme', role: 'admin' },
      T0,
      600,
    );
    await expect(issuer.verify(userToken, T0)).rejects.toMatchObject({ reason: 'invalid' });
  });

  it('the audience alone is enforced: a leoflow-user token signed with the agent key is refused', async () => {
    const token = await signWithAgentKey(agentPayload(T0, { aud: 'leoflow-user' }));
    await expect(issuer.verify(token, T0)).rejects.toMatchObject({ reason: 'invalid' });
  });

  it('a wrong issuer is refused', async () => {
    const token = await signWithAgentKey(agentPayload(T0, { iss: 'someone-else' }));
    await expect(issuer.verify(token, T0)).rejects.toMatchObject({ reason: 'invalid' });
  });

  it('a hand-signed token with the right shape is accepted (the negative cases above are meaningful)', async () => {
    const token = await signWithAgentKey(agentPayload(T0));
    await expect(issuer.verify(token, T0)).resolves.toMatchObject({ task_instance_id: 'ti-1' });
  });
});

describe('tampering and foreign keys (T03, T05)', () => {
  it('an altered payload is refused', async () => {
    const [h, , s] = (await issuer.mint(identity, T0)).split('.');
    const forged = `${h}.${b64(agentPayload(T0, { tid: 'other-tenant' }))}.${s}`;
    await expect(issuer.verify(forged, T0)).rejects.toMatchObject({ reason: 'invalid' });
  });

  it('a token signed by an unrelated Ed25519 key under our kid is refused', async () => {
    const stranger = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const token = await new SignJWT(agentPayload(T0))
      .setProtectedHeader({ alg: 'EdDSA', kid: agentRing.current().kid })
      .sign(stranger.privateKey);
    await expect(issuer.verify(token, T0)).rejects.toMatchObject({ reason: 'invalid' });
  });

  it('an unknown kid, a missing kid and a user-key kid are refused', async () => {
    for (const header of [
      { kid: 'agent-unknown' },
      { kid: undefined },
      { kid: userRing.current().kid },
    ]) {
      const token = await signWithAgentKey(agentPayload(T0), header);
      await expect(issuer.verify(token, T0)).rejects.toMatchObject({ reason: 'invalid' });
    }
  });

  it('a sub that disagrees with ti/try is refused', async () => {
    const token = await signWithAgentKey(agentPayload(T0, { sub: 'attempt:ti-1:2' }));
    await expect(issuer.verify(token, T0)).rejects.toMatchObject({ reason: 'invalid' });
  });

  it.each(['tid', 'try', 'ti', 'oiat'])('a token missing %s is refused', async (claim) => {
    const payload: Record<string, unknown> = agentPayload(T0);
    delete payload[claim];
    await expect(issuer.verify(await signWithAgentKey(payload), T0)).rejects.toMatchObject({
      reason: 'invalid',
    });
  });

  it('garbage is refused as invalid, never thrown raw', async () => {
    for (const t of ['', 'a.b.c', 'not-a-jwt', `${b64({ alg: 'EdDSA' })}..`]) {
      await expect(issuer.verify(t, T0)).rejects.toMatchObject({ reason: 'invalid' });
    }
  });
});

describe('algorithm pinning (T06)', () => {
  it('alg none is refused', async () => {
    const unsecured = `${b64({ alg: 'none', kid: agentRing.current().kid })}.${b64(agentPayload(T0))}.`;
    await expect(issuer.verify(unsecured, T0)).rejects.toMatchObject({ reason: 'invalid' });
  });

  it('HS256 keyed with the public key bytes (key confusion) is refused', async () => {
    const x = agentRing.publicJwks().keys.find((k) => k.kid === agentRing.current().kid)?.x ?? '';
    const head = b64({ alg: 'HS256', kid: agentRing.current().kid, typ: 'JWT' });
    const body = b64(agentPayload(T0));
    for (const secret of [x, Buffer.from(x, 'base64url')]) {
      const sig = createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url');
      await expect(issuer.verify(`${head}.${body}.${sig}`, T0)).rejects.toMatchObject({
        reason: 'invalid',
      });
    }
  });

  it('RS256 and ES256 are refused even when validly signed', async () => {
    for (const alg of ['RS256', 'ES256'] as const) {
      const pair = await generateKeyPair(alg);
      const token = await new SignJWT(agentPayload(T0))
        .setProtectedHeader({ alg, kid: agentRing.current().kid })
        .sign(pair.privateKey);
      await expect(issuer.verify(token, T0)).rejects.toMatchObject({ reason: 'invalid' });
    }
  });

  it('the Ed25519 alg identifier (not EdDSA) is refused: one accepted spelling only', async () => {
    const key = agentRing.current();
    const token = await new SignJWT(agentPayload(T0))
      .setProtectedHeader({ alg: 'Ed25519', kid: key.kid })
      .sign(key.privateKey);
    await expect(issuer.verify(token, T0)).rejects.toMatchObject({ reason: 'invalid' });
  });
});

describe('expiry and clock tolerance (T04)', () => {
  it(`the default tolerance is ${AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS}s, within 0..10`, () => {
    expect(issuer.clockToleranceSeconds).toBe(5);
    expect(() => new AgentTokenVerifier(agentRing, { clockToleranceSeconds: 11 })).toThrow(
      /0\.\.10/,
    );
    expect(() => new AgentTokenVerifier(agentRing, { clockToleranceSeconds: -1 })).toThrow();
    expect(
      new AgentTokenVerifier(agentRing, { clockToleranceSeconds: 0 }).clockToleranceSeconds,
    ).toBe(0);
  });

  it('a token is valid until exp + tolerance and expired from then on', async () => {
    const token = await issuer.mint(identity, T0);
    const exp = T0 + TTL * 1000;
    await expect(issuer.verify(token, exp - 1)).resolves.toBeDefined();
    await expect(issuer.verify(token, exp + 4_999)).resolves.toBeDefined();
    await expect(issuer.verify(token, exp + 5_000)).rejects.toMatchObject({ reason: 'expired' });
    await expect(issuer.verify(token, exp + HOUR)).rejects.toMatchObject({ reason: 'expired' });
  });

  it('with tolerance 0 the token dies exactly at exp', async () => {
    const strict = new AgentTokenIssuer(agentRing, TTL, { clockToleranceSeconds: 0 });
    const token = await strict.mint(identity, T0);
    await expect(strict.verify(token, T0 + TTL * 1000 - 1)).resolves.toBeDefined();
    await expect(strict.verify(token, T0 + TTL * 1000)).rejects.toMatchObject({
      reason: 'expired',
    });
  });

  it('a token minted already expired (TTL −1 min) is refused', async () => {
    const token = await signWithAgentKey(agentPayload(T0, { exp: T0 / 1000 - 60 }));
    await expect(issuer.verify(token, T0)).rejects.toMatchObject({ reason: 'expired' });
  });

  it('a token not yet valid (nbf beyond tolerance) is refused', async () => {
    const token = await signWithAgentKey(agentPayload(T0, { nbf: T0 / 1000 + 60 }));
    await expect(issuer.verify(token, T0)).rejects.toMatchObject({ reason: 'invalid' });
  });
});

describe('renew (T11–T15, T21)', () => {
  async function claimsAt(nowMs: number, oiat?: number) {
    return issuer.verify(await issuer.mint(identity, nowMs, oiat), nowMs);
  }

  it('T11: exp = renewal time + TTL (not old exp + TTL), same oiat and identity', async () => {
    const c0 = await claimsAt(T0);
    const r = await issuer.renew(c0, T0 + 5 * MIN, CEILING);
    if (!('token' in r)) throw new Error('expected a token');
    const c1 = await issuer.verify(r.token, T0 + 5 * MIN);
    expect(c1.iat).toBe((T0 + 5 * MIN) / 1000);
    expect(c1.exp - c1.iat).toBe(600);
    expect(c1.exp).toBe((T0 + 15 * MIN) / 1000);
    expect(c1.oiat).toBe(T0 / 1000);
    expect(identityOf(c1)).toEqual(identityOf(c0));
  });

  it('T12: a lineage renewed every 5 min never accumulates and keeps oiat', async () => {
    let c = await claimsAt(T0);
    for (let i = 1; i <= 24; i++) {
      const now = T0 + i * 5 * MIN;
      const r = await issuer.renew(c, now, CEILING);
      if (!('token' in r)) throw new Error(`generation ${i} stopped`);
      c = await issuer.verify(r.token, now);
      expect(c.oiat).toBe(T0 / 1000);
      expect(c.exp).toBe(now / 1000 + 600);
    }
  });

  it('T13: past the ceiling renewal stops quietly; the current token is untouched', async () => {
    // The lineage started at T0; its current token was renewed one minute before the stop.
    const token = await issuer.mint(identity, T0 + CEILING - MIN, T0 / 1000);
    const c = await issuer.verify(token, T0 + CEILING - MIN);
    await expect(issuer.renew(c, T0 + CEILING + 1000, CEILING)).resolves.toEqual({
      stopped: 'ceiling',
    });
    // untouched: it still verifies, with the same exp, until that exp — and not after
    const still = await issuer.verify(token, T0 + CEILING + 1000);
    expect(still.exp).toBe(c.exp);
    expect(still.exp).toBe((T0 + CEILING - MIN) / 1000 + 600);
    await expect(
      issuer.verify(token, c.exp * 1000 + (issuer.clockToleranceSeconds + 1) * 1000),
    ).rejects.toMatchObject({ reason: 'expired' });
  });

  it('the ceiling boundary: renews at exactly the ceiling, stops just after', async () => {
    const c = await claimsAt(T0 + CEILING, T0 / 1000);
    await expect(issuer.renew(c, T0 + CEILING, CEILING)).resolves.toHaveProperty('token');
    await expect(issuer.renew(c, T0 + CEILING + 1, CEILING)).resolves.toEqual({
      stopped: 'ceiling',
    });
  });

  it.each([0, -1])(
    'T14: ceiling %s disables it: renews 1000 h after first issue',
    async (ceiling) => {
      const c = await claimsAt(T0 + 1000 * HOUR, T0 / 1000);
      const r = await issuer.renew(c, T0 + 1000 * HOUR, ceiling);
      expect(r).toHaveProperty('token');
    },
  );

  it('T15: a cleared old run re-dispatched 1000 h later starts a new lineage', async () => {
    // The old lineage (first issued at T0) is long past the ceiling: it can never renew again.
    const old = await claimsAt(T0 + 1000 * HOUR - MIN, T0 / 1000);
    await expect(issuer.renew(old, T0 + 1000 * HOUR, CEILING)).resolves.toEqual({
      stopped: 'ceiling',
    });
    // A re-dispatch mints without an inherited oiat: a new lineage dated from the re-dispatch,
    // which renews normally.
    const redispatch = T0 + 1000 * HOUR;
    const c = await claimsAt(redispatch);
    expect(c.oiat).toBe(redispatch / 1000);
    expect(c.oiat).not.toBe(old.oiat);
    const r = await issuer.renew(c, redispatch + 5 * MIN, CEILING);
    if (!('token' in r)) throw new Error('expected a token');
    expect((await issuer.verify(r.token, redispatch + 5 * MIN)).oiat).toBe(redispatch / 1000);
  });

  it('T21: a 1 ms ceiling stops renewal of a live attempt without any error', async () => {
    const c = await claimsAt(T0);
    await expect(issuer.renew(c, T0 + 1000, 1)).resolves.toEqual({ stopped: 'ceiling' });
  });

  it('a verify-only replica accepts renewed tokens too', async () => {
    const c = await claimsAt(T0);
    const r = await issuer.renew(c, T0 + MIN, CEILING);
    if (!('token' in r)) throw new Error('expected a token');
    const replica = new AgentTokenVerifier(
      await VerifyOnlyKeyring.fromJwks(agentRing.publicJwks()),
    );
    await expect(replica.verify(r.token, T0 + MIN)).resolves.toMatchObject({ oiat: T0 / 1000 });
  });
});

describe('the fast mint (issue 38)', () => {
  it('is byte for byte what jose SignJWT signs, with and without a map index, and verifies', async () => {
    const ring = await loadSigningKeyring(tempDir(), 'agent');
    const issuer = new AgentTokenIssuer(ring, 600);
    const base = {
      tenant_id: 'default',
      dag_id: 'd',
      dag_run_id: 'run-1',
      run_id: 'manual__1',
      task_id: 't',
      try_number: 2,
      task_instance_id: 'ti-1',
      dispatch_gen: 3,
    };
    for (const identity of [base, { ...base, map_index: 4 }, { ...base, map_index: -1 }]) {
      for (const oiat of [undefined, 1_700_000_000]) {
        const now = 1_700_000_123_456;
        const fast = await issuer.mint(identity, now, oiat);
        expect(fast).toBe(await issuer.mintWithJose(identity, now, oiat));
        const claims = await issuer.verify(fast, now);
        expect(claims.task_instance_id).toBe('ti-1');
        expect(claims.exp - claims.iat).toBe(600);
      }
    }
  });
});
