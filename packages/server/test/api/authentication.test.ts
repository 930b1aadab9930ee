import { createHmac, generateKeyPairSync, randomUUID } from 'node:crypto';
import { Code, ConnectError } from '@connectrpc/connect';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSigningKeyring } from '../../src/auth/signing-keys.js';
import { UserTokenIssuer, USER_AUDIENCE } from '../../src/auth/user-token.js';
import { TOKEN_ISSUER } from '../../src/auth/agent-token.js';
import { createApiHarness, type ApiHarness } from '../support/api-harness.js';
import { createHarness } from '../support/harness.js';

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

describe('user API tokens (real store, real keyring, injectable clock)', () => {
  let h: ApiHarness;
  beforeAll(async () => {
    h = await createApiHarness('sqlite');
    await h.store.ensureTenant('team-a', 'team-a', h.clock.now());
  });
  afterAll(() => h.close());

  const whoami = (token: string) => h.request(token, 'GET', '/api/v1/whoami');

  it('a live token works until the instant it is revoked, and never after', async () => {
    const token = await h.tokenFor('team-a', 'viewer');
    const other = await h.tokenFor('team-a', 'viewer');
    const me = await whoami(token);
    expect(me.status).toBe(200);
    const admin = await h.tokenFor('team-a', 'admin');
    const revoke = await h.request(admin, 'DELETE', `/api/v1/tokens/${String(me.json.token_id)}`);
    expect(revoke.status, revoke.text).toBe(200);
    expect((await whoami(token)).status).toBe(401);
    // Revocation is per jti: the other token of the same tenant and role is untouched.
    expect((await whoami(other)).status).toBe(200);
    // And revoking twice is a 404 that says what to do.
    const again = await h.request(admin, 'DELETE', `/api/v1/tokens/${String(me.json.token_id)}`);
    expect(again.status).toBe(404);
    expect(again.json).toMatchObject({ code: 'LF_TOKEN_NOT_FOUND' });
    // The reference is not echoed (it could be a pasted token).
    expect(again.text).not.toContain(String(me.json.token_id));
  });

  it('a token with a TTL works up to its expiry and is refused after it', async () => {
    const token = await h.tokenFor('team-a', 'viewer', 60);
    h.clock.advance(59_000);
    expect((await whoami(token)).status).toBe(200);
    h.clock.advance(2_000);
    expect((await whoami(token)).status).toBe(401);
  });

  it('refuses a validly signed token that is not on record (minted outside create)', async () => {
    const stray = await h.users.mint(
      { subject: 'x', tenant_id: 'team-a', role: 'admin' },
      h.clock.now(),
    );
    expect((await whoami(stray.token)).status).toBe(401);
  });

  it('refuses alg none, HS256 keyed with the public key, another EdDSA key and an RS256 token', async () => {
    const real = await h.tokenFor('team-a', 'admin');
    const [headerB64, payloadB64] = real.split('.') as [string, string];
    const header = JSON.parse(Buffer.from(headerB64, 'base64url').toString()) as { kid: string };
    const payload = JSON.parse(Buffer.from(payloadB64, 'base64url').toString()) as object;

    const none = `${b64({ alg: 'none', typ: 'JWT', kid: header.kid })}.${payloadB64}.`;
    expect((await whoami(none)).status).toBe(401);

    const hsHead = b64({ alg: 'HS256', typ: 'JWT', kid: header.kid });
    const hsSig = createHmac('sha256', 'public-key-as-secret')
      .update(`${hsHead}.${payloadB64}`)
      .digest('base64url');
    expect((await whoami(`${hsHead}.${payloadB64}.${hsSig}`)).status).toBe(401);

    const otherEd = generateKeyPairSync('ed25519');
    const forged = await new SignJWT(payload as Record<string, unknown>)
      .setProtectedHeader({ alg: 'EdDSA', kid: header.kid, typ: 'JWT' })
      .sign(otherEd.privateKey);
    expect((await whoami(forged)).status).toBe(401);

    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rs = await new SignJWT(payload as Record<string, unknown>)
      .setProtectedHeader({ alg: 'RS256', kid: header.kid, typ: 'JWT' })
      .sign(rsa.privateKey);
    expect((await whoami(rs)).status).toBe(401);

    // Control: the untampered token is accepted.
    expect((await whoami(real)).status).toBe(200);
  });

  it('refuses an agent-audience token signed with a key the API does not hold', async () => {
    const agentRing = await loadSigningKeyring(
      (await import('node:os')).tmpdir() + `/lf-agent-${randomUUID()}`,
      'agent',
    );
    const agentToken = await new SignJWT({ tid: 'team-a', role: 'admin', jti: randomUUID() })
      .setProtectedHeader({ alg: 'EdDSA', kid: agentRing.current().kid, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience('leoflow-agent')
      .setSubject('attempt:x:1')
      .sign(agentRing.current().privateKey);
    expect((await whoami(agentToken)).status).toBe(401);
  });

  it('rotating the user signing key keeps old tokens working and signs new ones with the new kid', async () => {
    const platform = await h.tokenFor('default', 'admin');
    const before = await h.tokenFor('team-a', 'viewer');
    const rotated = await h.request(platform, 'POST', '/api/v1/auth/signing-keys/rotate', {});
    expect(rotated.status, rotated.text).toBe(200);
    const newKid = String(rotated.json.kid);
    const after = await h.tokenFor('team-a', 'viewer');
    const kidOf = (t: string) =>
      (JSON.parse(Buffer.from(t.split('.')[0] ?? '', 'base64url').toString()) as { kid: string })
        .kid;
    expect(kidOf(after)).toBe(newKid);
    expect(kidOf(before)).not.toBe(newKid);
    expect((await whoami(before)).status).toBe(200);
    expect((await whoami(after)).status).toBe(200);
    expect((await whoami(platform)).status).toBe(200);
  });

  it('mints a token once: lists show id, name and role but never the token', async () => {
    const admin = await h.tokenFor('team-a', 'admin');
    const created = await h.request(admin, 'POST', '/api/v1/tokens', {
      role: 'developer',
      name: 'ci-bot',
      ttl_seconds: 3600,
    });
    expect(created.status, created.text).toBe(201);
    const token = String(created.json.token);
    expect(token.split('.')).toHaveLength(3);
    const list = await h.request(admin, 'GET', '/api/v1/tokens?name=ci-bot');
    expect(list.json.tokens).toEqual([
      expect.objectContaining({ name: 'ci-bot', role: 'developer' }),
    ]);
    expect(list.text).not.toContain(token);
    const audit = await h.request(admin, 'GET', '/api/v1/audit?action=token.create');
    expect(audit.text).not.toContain(token);
    expect(audit.json.events).toEqual(
      expect.arrayContaining([expect.objectContaining({ resource_id: created.json.id })]),
    );
  });

  it('refuses an unknown role and a tenant that does not exist, saying what to do', async () => {
    const platform = await h.tokenFor('default', 'admin');
    const badRole = await h.request(platform, 'POST', '/api/v1/tokens', { role: 'superuser' });
    expect(badRole.status).toBe(400);
    const noTenant = await h.request(platform, 'POST', '/api/v1/tenants/nope/tokens', {
      role: 'viewer',
    });
    expect(noTenant.status).toBe(404);
    expect(noTenant.json.message).toContain('leoflow tenants create nope');
  });
});

describe('a user token at the agent service (real HTTP/2)', () => {
  it('is refused as unauthenticated (the agent verifier knows neither its key nor its audience)', async () => {
    const h = await createHarness({ rpc: 'http2' });
    try {
      const users = new UserTokenIssuer(await loadSigningKeyring(h.dir, 'user'));
      const { token } = await users.mint(
        { subject: 'admin', tenant_id: 'default', role: 'admin' },
        h.clock.now(),
      );
      const err = await h
        .agent(token)
        .getVariables({})
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.Unauthenticated);
      expect(USER_AUDIENCE).toBe('leoflow-user');
    } finally {
      await h.close();
    }
  });
});

describe('audit writes never change the result of the action they record', () => {
  it('a failing audit store still lets the mutation succeed, and the mutation is real', async () => {
    const h = await createApiHarness('sqlite');
    try {
      const admin = await h.tokenFor('default', 'admin');
      h.store.appendAudit = () => Promise.reject(new Error('audit table is gone'));
      const put = await h.request(admin, 'PUT', '/api/v1/variables/still_set', { value: 'v1' });
      expect(put.status, put.text).toBe(200);
      expect(put.text).not.toContain('audit table is gone');
      const got = await h.request(admin, 'GET', '/api/v1/variables/still_set');
      expect(got.json).toMatchObject({ value: 'v1' });
    } finally {
      await h.close();
    }
  });
});

describe("standalone's admin token across upgrades", () => {
  it('adopts a token minted before tokens were recorded, and never revives a revoked one', async () => {
    const h = await createApiHarness('sqlite');
    try {
      // As written by an earlier version: validly signed, but no api_tokens row.
      const legacy = await h.users.mint(
        { subject: 'admin', tenant_id: 'default', role: 'admin' },
        h.clock.now(),
      );
      expect((await h.request(legacy.token, 'GET', '/api/v1/whoami')).status).toBe(401);
      expect(await h.tokens.adopt(legacy.token, 'admin')).toBe(true);
      expect((await h.request(legacy.token, 'GET', '/api/v1/whoami')).status).toBe(200);

      expect(await h.store.revokeApiToken('default', legacy.jti, 'test', h.clock.now())).toBe(true);
      expect(await h.tokens.adopt(legacy.token, 'admin')).toBe(true);
      expect((await h.request(legacy.token, 'GET', '/api/v1/whoami')).status).toBe(401);
      expect(await h.tokens.adopt('not.a.token', 'admin')).toBe(false);
    } finally {
      await h.close();
    }
  });
});

describe('refusals are audited', () => {
  it('a 403 writes authz.denied (route, permission, role; no body) to the tenant log', async () => {
    const h = await createApiHarness('sqlite');
    try {
      await h.store.ensureTenant('team-a', 'team-a', h.clock.now());
      const viewer = await h.tokenFor('team-a', 'viewer');
      const admin = await h.tokenFor('team-a', 'admin');
      const res = await h.request(viewer, 'PUT', '/api/v1/variables/x', {
        value: 'canary-body-9f',
      });
      expect(res.status).toBe(403);
      const audit = await h.request(admin, 'GET', '/api/v1/audit?action=authz.denied');
      expect(audit.json.events).toEqual([
        expect.objectContaining({
          resource_type: 'route',
          resource_id: 'PUT /api/v1/variables/:key',
          payload: expect.objectContaining({ permission: 'variables:write', role: 'viewer' }),
        }),
      ]);
      expect(audit.text).not.toContain('canary-body-9f');
    } finally {
      await h.close();
    }
  });
});
