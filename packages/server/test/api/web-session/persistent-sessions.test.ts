import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionDigest, UiSessions } from '../../../src/api/web-session/sessions.js';
import { SignInThrottle } from '../../../src/api/web-session/sign-in-throttle.js';
import type { KyselyStore } from '../../../src/store/kysely-store.js';
import { createApiHarness, PLATFORM_TENANT, type ApiHarness } from '../../support/api-harness.js';
import { forEachDialect } from '../../support/dialects.js';

const HOST = '127.0.0.1:8080';
const browser = { host: HOST, 'x-leoflow-csrf': '1', origin: `http://${HOST}` };
const HOUR = 60 * 60_000;

/**
 * Web app sessions live in the store: a second UiSessions over the same store (what a restart
 * builds) honours the cookie; the store keeps the cookie's SHA-256, never the cookie nor the
 * token; sign-out deletes the row; expired rows are swept.
 */
forEachDialect('web app sessions in the store', (dialect) => {
  let h: ApiHarness;
  let sessions: UiSessions;
  beforeAll(async () => {
    h = await createApiHarness(dialect, {
      ui: (clock, store) => ({
        sessions: (sessions = new UiSessions(store, clock, { sessionMs: HOUR, codeMs: 60_000 })),
        throttle: new SignInThrottle(clock),
        trustedProxies: [],
        allowedHosts: ['127.0.0.1'],
        secureCookies: false,
        staticDir: null,
      }),
    });
  });
  afterAll(() => h.close());

  const signIn = async (token: string) => {
    const res = await h.app.inject({
      method: 'POST',
      url: '/api/ui/session',
      headers: { ...browser, 'content-type': 'application/json' },
      payload: JSON.stringify({ token }),
    });
    expect(res.statusCode, res.body).toBe(200);
    const setCookie = String(res.headers['set-cookie']);
    const value = /^leoflow_session=([^;]+)/.exec(setCookie)?.[1] ?? '';
    return { value, cookie: `leoflow_session=${value}`, setCookie };
  };
  const whoami = (cookie: string) =>
    h.app.inject({ method: 'GET', url: '/api/v1/whoami', headers: { host: HOST, cookie } });
  const rows = () =>
    (h.store as KyselyStore).kysely.selectFrom('ui_sessions').selectAll().execute();

  it('keeps only the SHA-256 of the cookie, and a fresh UiSessions over the same store (a restart) honours it', async () => {
    const token = await h.tokenFor(PLATFORM_TENANT, 'operator');
    const { value, cookie } = await signIn(token);
    const all = await rows();
    const row = all.find((r) => r.id_hash === sessionDigest(value));
    expect(row).toMatchObject({ tenant_id: PLATFORM_TENANT, role: 'operator' });
    const dump = JSON.stringify(all);
    expect(dump).not.toContain(value);
    expect(dump).not.toContain(token);

    const restarted = new UiSessions(h.store, h.clock);
    expect(await restarted.principalOf(value)).toMatchObject({
      tenant_id: PLATFORM_TENANT,
      role: 'operator',
    });
    expect(await restarted.principalOf(`${value}x`)).toBeNull();
    expect((await whoami(cookie)).statusCode).toBe(200);
  });

  it('sign-out deletes the row: the same cookie is dead for every instance', async () => {
    const { value, cookie } = await signIn(await h.tokenFor(PLATFORM_TENANT, 'viewer'));
    const out = await h.app.inject({
      method: 'DELETE',
      url: '/api/ui/session',
      headers: { ...browser, cookie },
    });
    expect(out.json()).toEqual({ signed_out: true });
    expect((await rows()).some((r) => r.id_hash === sessionDigest(value))).toBe(false);
    expect(await new UiSessions(h.store, h.clock).principalOf(value)).toBeNull();
    expect((await whoami(cookie)).statusCode).toBe(401);
  });

  it('a session ends at its TTL or at its token expiry, whichever is first; sweeping removes only expired rows', async () => {
    // Later than the earlier tests' sessions, so theirs expire first.
    h.clock.advance(60_000);
    // A token with 10 minutes left: the session (TTL one hour) ends with it.
    const short = await signIn(await h.tokenFor(PLATFORM_TENANT, 'viewer', 600));
    expect(short.setCookie).toMatch(/Max-Age=600(;|$)/);
    const long = await signIn(await h.tokenFor(PLATFORM_TENANT, 'viewer'));
    expect(long.setCookie).toMatch(/Max-Age=3600(;|$)/);

    h.clock.advance(600_000);
    expect((await whoami(short.cookie)).statusCode).toBe(401);
    expect((await whoami(long.cookie)).statusCode).toBe(200);

    h.clock.advance(HOUR - 600_000 - 1);
    expect((await whoami(long.cookie)).statusCode).toBe(200);
    const before = (await rows()).map((r) => r.id_hash);
    expect(before).toContain(sessionDigest(long.value));
    // Every row of the earlier tests is expired by now, the long one has 1 ms left.
    const swept = await sessions.sweep();
    expect(swept).toBeGreaterThan(0);
    expect((await rows()).map((r) => r.id_hash)).toEqual([sessionDigest(long.value)]);
    h.clock.advance(1);
    // Expired by the clock while its row (and its token) are still there: refused, and removed.
    expect(await rows()).toHaveLength(1);
    expect((await whoami(long.cookie)).statusCode).toBe(401);
    expect(await rows()).toEqual([]);
  });

  it('revoking the token ends its sessions, even though the session row is still there', async () => {
    const token = await h.tokenFor(PLATFORM_TENANT, 'viewer');
    const { cookie } = await signIn(token);
    const me = (await whoami(cookie)).json<{ token_id: string }>();
    await h.request(
      await h.tokenFor(PLATFORM_TENANT, 'admin'),
      'DELETE',
      `/api/v1/tokens/${me.token_id}`,
    );
    expect((await whoami(cookie)).statusCode).toBe(401);
  });
});

describe('sessionDigest', () => {
  it('is the base64url SHA-256 of the value', () => {
    expect(sessionDigest('abc')).toBe('ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0');
  });
});
