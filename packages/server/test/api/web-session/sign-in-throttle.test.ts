import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UiSessions } from '../../../src/api/web-session/sessions.js';
import { SignInThrottle } from '../../../src/api/web-session/sign-in-throttle.js';
import { createApiHarness, PLATFORM_TENANT, type ApiHarness } from '../../support/api-harness.js';

const HOST = '127.0.0.1:8080';
const WINDOW_MS = 60_000;
const PROXY = '10.0.0.1';

/**
 * Failed sign-ins are throttled per source address (the TCP peer; X-Forwarded-For only from a
 * configured proxy), with the same error body as every refusal and a Retry-After; a legitimate
 * sign-in works before the limit and again once the window has passed (injectable clock).
 */
describe('web app sign-in throttle (real API, real tokens, injectable clock)', () => {
  let h: ApiHarness;
  let sessions: UiSessions;
  beforeAll(async () => {
    h = await createApiHarness('sqlite', {
      ui: (clock, store) => ({
        sessions: (sessions = new UiSessions(store, clock)),
        throttle: new SignInThrottle(clock, { maxFailures: 3, windowMs: WINDOW_MS }),
        trustedProxies: [PROXY],
        allowedHosts: ['127.0.0.1'],
        secureCookies: false,
        staticDir: null,
      }),
    });
  });
  afterAll(() => h.close());

  const signIn = (
    body: { token: string } | { code: string },
    from = '127.0.0.1',
    headers: Record<string, string> = {},
  ) =>
    h.app.inject({
      method: 'POST',
      url: '/api/ui/session',
      remoteAddress: from,
      headers: {
        host: HOST,
        'x-leoflow-csrf': '1',
        origin: `http://${HOST}`,
        'content-type': 'application/json',
        ...headers,
      },
      payload: JSON.stringify(body),
    });
  const wrong = { token: 'not-a-token' };

  it('refuses every sign-in from a source after its failures, until the window ends; then a valid one works', async () => {
    const token = await h.tokenFor(PLATFORM_TENANT, 'viewer');
    const from = '192.0.2.10';
    expect((await signIn(wrong, from)).statusCode).toBe(401);
    expect((await signIn(wrong, from)).statusCode).toBe(401);
    // Under the limit a right token is never refused.
    expect((await signIn({ token }, from)).statusCode).toBe(200);
    expect((await signIn(wrong, from)).statusCode).toBe(401);

    h.clock.advance(1_000);
    const refused = await signIn({ token }, from);
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBe('59');
    expect(refused.headers['set-cookie']).toBeUndefined();
    expect(refused.json()).toEqual({
      code: 'LF_SIGN_IN_THROTTLED',
      message: expect.stringContaining('59 seconds') as string,
      details: { retry_after_seconds: 59 },
    });
    expect(refused.body).not.toContain(token);
    // Another source is not affected.
    expect((await signIn({ token }, '192.0.2.11')).statusCode).toBe(200);

    h.clock.advance(WINDOW_MS - 1_001);
    expect((await signIn({ token }, from)).statusCode).toBe(429);
    h.clock.advance(1);
    expect((await signIn({ token }, from)).statusCode).toBe(200);
  });

  it('counts spent or unknown one-time codes; a throttled code is not spent', async () => {
    const from = '192.0.2.20';
    const code = sessions.mintSignInCode(await h.tokenFor(PLATFORM_TENANT, 'viewer'));
    for (let i = 0; i < 3; i++)
      expect((await signIn({ code: `guess-${i}` }, from)).statusCode).toBe(401);
    expect((await signIn({ code }, from)).statusCode).toBe(429);
    h.clock.advance(WINDOW_MS);
    expect((await signIn({ code }, from)).statusCode).toBe(200);
    // …and used once.
    expect((await signIn({ code }, from)).statusCode).toBe(401);
  });

  it('ignores X-Forwarded-For from an untrusted peer; believes it from the configured proxy', async () => {
    const token = await h.tokenFor(PLATFORM_TENANT, 'viewer');
    const from = '192.0.2.30';
    for (let i = 0; i < 3; i++) {
      const r = await signIn(wrong, from, { 'x-forwarded-for': `198.51.100.${i}` });
      expect(r.statusCode).toBe(401);
    }
    // Rotating the header did not make the peer three different sources.
    expect((await signIn({ token }, from, { 'x-forwarded-for': '198.51.100.99' })).statusCode).toBe(
      429,
    );

    // Behind the configured proxy, the header names the client: one client is throttled…
    for (let i = 0; i < 3; i++) {
      const r = await signIn(wrong, PROXY, { 'x-forwarded-for': 'spoofed, 203.0.113.5' });
      expect(r.statusCode).toBe(401);
    }
    expect((await signIn({ token }, PROXY, { 'x-forwarded-for': '203.0.113.5' })).statusCode).toBe(
      429,
    );
    // …and the proxy's other clients are not.
    expect((await signIn({ token }, PROXY, { 'x-forwarded-for': '203.0.113.6' })).statusCode).toBe(
      200,
    );
    h.clock.advance(WINDOW_MS);
  });

  it('IPv4-mapped IPv6 and plain IPv4 are one source', async () => {
    const token = await h.tokenFor(PLATFORM_TENANT, 'viewer');
    for (let i = 0; i < 3; i++)
      expect((await signIn(wrong, '::ffff:192.0.2.40')).statusCode).toBe(401);
    expect((await signIn({ token }, '192.0.2.40')).statusCode).toBe(429);
  });
});
