import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignInThrottle } from '../../../src/api/web-session/sign-in-throttle.js';
import { UiSessions } from '../../../src/api/web-session/sessions.js';
import { UI_CONTENT_SECURITY_POLICY } from '../../../src/api/web-session/static.js';
import { createApiHarness, PLATFORM_TENANT, type ApiHarness } from '../../support/api-harness.js';

const HOST = '127.0.0.1:8080';
const ORIGIN = `http://${HOST}`;

/**
 * The web app's sign-in: an API token becomes an HttpOnly cookie that the REST API accepts
 * exactly like the bearer token (same roles, same tenant), within limits a bearer never needs —
 * the Host must be this server's and a state-changing request must prove it comes from the app.
 */
describe('web app sessions (real API, real tokens, injectable clock)', () => {
  let h: ApiHarness;
  let staticDir: string;
  let sessions: UiSessions;
  beforeAll(async () => {
    staticDir = mkdtempSync(join(tmpdir(), 'leoflow-ui-dist-'));
    mkdirSync(join(staticDir, 'assets'));
    writeFileSync(join(staticDir, 'index.html'), '<!doctype html><div id="root"></div>');
    writeFileSync(join(staticDir, 'assets', 'app-1.js'), 'console.log(1)');
    h = await createApiHarness('sqlite', {
      ui: (clock, store) => ({
        sessions: (sessions = new UiSessions(store, clock, {
          sessionMs: 60 * 60_000,
          codeMs: 60_000,
        })),
        throttle: new SignInThrottle(clock),
        trustedProxies: [],
        allowedHosts: ['127.0.0.1', 'localhost'],
        secureCookies: false,
        staticDir,
        eventsIntervalMs: 50,
      }),
    });
  });
  afterAll(async () => {
    await h.close();
    rmSync(staticDir, { recursive: true, force: true });
  });

  const inject = (
    method: string,
    url: string,
    o: { cookie?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) =>
    h.app.inject({
      method: method as 'GET',
      url,
      headers: {
        host: HOST,
        ...(o.cookie ? { cookie: o.cookie } : {}),
        ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...o.headers,
      },
      ...(o.body !== undefined ? { payload: JSON.stringify(o.body) } : {}),
    });

  const browser = { 'x-leoflow-csrf': '1', origin: ORIGIN };

  /** What @fastify/helmet (and the one extra header) put on every answer, page or REST. */
  const expectSecurityHeaders = (headers: Record<string, unknown>, what: string) => {
    expect(headers['x-content-type-options'], what).toBe('nosniff');
    expect(headers['referrer-policy'], what).toBe('no-referrer');
    expect(headers['x-frame-options'], what).toBe('DENY');
    expect(headers['cross-origin-opener-policy'], what).toBe('same-origin');
    expect(headers['cross-origin-resource-policy'], what).toBe('same-origin');
    expect(headers['origin-agent-cluster'], what).toBe('?1');
    expect(headers['x-dns-prefetch-control'], what).toBe('off');
    expect(headers['x-download-options'], what).toBe('noopen');
    expect(headers['x-permitted-cross-domain-policies'], what).toBe('none');
    expect(headers['x-xss-protection'], what).toBe('0');
    expect(headers['permissions-policy'], what).toBe(
      'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
    );
    expect(headers['x-powered-by'], what).toBeUndefined();
    // Plain HTTP here (secureCookies false): no HSTS pin.
    expect(headers['strict-transport-security'], what).toBeUndefined();
  };

  async function signIn(body: { token: string } | { code: string }) {
    const res = await inject('POST', '/api/ui/session', { body, headers: browser });
    const setCookie = String(res.headers['set-cookie'] ?? '');
    const cookie = /^(leoflow_session=[^;]+)/.exec(setCookie)?.[1] ?? '';
    return { res, setCookie, cookie };
  }

  it('exchanges a token for an HttpOnly SameSite=Strict cookie with an expiry, and never echoes the token', async () => {
    const token = await h.tokenFor(PLATFORM_TENANT, 'viewer');
    const { res, setCookie, cookie } = await signIn({ token });
    expect(res.statusCode, res.body).toBe(200);
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).toMatch(/Max-Age=3600/);
    expect(setCookie).not.toMatch(/Secure/);
    expect(setCookie).not.toContain(token);
    expect(res.body).not.toContain(token);
    const me = await inject('GET', '/api/v1/whoami', { cookie });
    expect(me.statusCode).toBe(200);
    expect(me.json()).toMatchObject({ role: 'viewer', tenant_id: PLATFORM_TENANT });
  });

  it('a cookie has the same role and tenant as its token: a viewer session may read but not trigger, and sees only its tenant', async () => {
    const other = await h.seedTenant('team-b');
    const mine = await h.seedTenant('team-c');
    const { cookie } = await signIn({ token: await h.tokenFor('team-c', 'viewer') });
    expect((await inject('GET', `/api/v1/dags/${mine.dag_id}`, { cookie })).statusCode).toBe(200);
    expect((await inject('GET', `/api/v1/dags/${other.dag_id}`, { cookie })).statusCode).toBe(404);
    const trigger = await inject('POST', `/api/v1/dags/${mine.dag_id}/runs`, {
      cookie,
      body: {},
      headers: browser,
    });
    expect(trigger.statusCode).toBe(403);
    expect(trigger.json()).toMatchObject({ code: 'LF_FORBIDDEN' });
    // The reveal permission is the role's too.
    const reveal = await inject('GET', `/api/v1/variables/${mine.variable}?reveal=true`, {
      cookie,
    });
    expect(reveal.statusCode).toBe(403);
    expect(reveal.body).not.toContain(mine.variableValue);
  });

  it('refuses a session after its expiry, after sign-out, and after its token is revoked', async () => {
    const a = await signIn({ token: await h.tokenFor(PLATFORM_TENANT, 'viewer') });
    expect((await inject('GET', '/api/v1/whoami', { cookie: a.cookie })).statusCode).toBe(200);
    h.clock.advance(60 * 60_000);
    expect((await inject('GET', '/api/v1/whoami', { cookie: a.cookie })).statusCode).toBe(401);

    const b = await signIn({ token: await h.tokenFor(PLATFORM_TENANT, 'viewer') });
    const out = await inject('DELETE', '/api/ui/session', { cookie: b.cookie, headers: browser });
    expect(out.statusCode).toBe(200);
    expect(out.json()).toEqual({ signed_out: true });
    expect(String(out.headers['set-cookie'])).toMatch(/Max-Age=0/);
    expect((await inject('GET', '/api/v1/whoami', { cookie: b.cookie })).statusCode).toBe(401);

    const token = await h.tokenFor(PLATFORM_TENANT, 'viewer');
    const c = await signIn({ token });
    const me = (await inject('GET', '/api/v1/whoami', { cookie: c.cookie })).json<{
      token_id: string;
    }>();
    const admin = await h.tokenFor(PLATFORM_TENANT, 'admin');
    expect((await h.request(admin, 'DELETE', `/api/v1/tokens/${me.token_id}`)).status).toBe(200);
    expect((await inject('GET', '/api/v1/whoami', { cookie: c.cookie })).statusCode).toBe(401);
  });

  it('refuses a bad token and a forged cookie', async () => {
    const bad = await signIn({ token: 'not-a-token' });
    expect(bad.res.statusCode).toBe(401);
    expect(bad.setCookie).toBe('');
    const forged = await inject('GET', '/api/v1/whoami', { cookie: 'leoflow_session=forged' });
    expect(forged.statusCode).toBe(401);
  });

  it('refuses a cookie request whose Host is not one of the configured names (DNS rebinding)', async () => {
    const { cookie } = await signIn({ token: await h.tokenFor(PLATFORM_TENANT, 'viewer') });
    const rebound = await inject('GET', '/api/v1/whoami', {
      cookie,
      headers: { host: 'attacker.example:8080' },
    });
    expect(rebound.statusCode).toBe(403);
    expect(rebound.json()).toMatchObject({ code: 'LF_HOST_NOT_ALLOWED' });
    const ok = await inject('GET', '/api/v1/whoami', {
      cookie,
      headers: { host: 'localhost:8080' },
    });
    expect(ok.statusCode).toBe(200);
    // Signing in under a foreign name is refused too.
    const signin = await inject('POST', '/api/ui/session', {
      body: { token: await h.tokenFor(PLATFORM_TENANT, 'viewer') },
      headers: { ...browser, host: 'attacker.example' },
    });
    expect(signin.statusCode).toBe(403);
  });

  it('refuses a state-changing cookie request without the CSRF header or from another origin; bearer scripts are unaffected', async () => {
    const t = await h.seedTenant('team-d');
    const { cookie } = await signIn({ token: await h.tokenFor('team-d', 'operator') });
    const url = `/api/v1/dags/${t.dag_id}`;
    const noHeader = await inject('PATCH', url, { cookie, body: { is_paused: true } });
    expect(noHeader.statusCode).toBe(403);
    expect(noHeader.json()).toMatchObject({ code: 'LF_CSRF' });
    const crossOrigin = await inject('PATCH', url, {
      cookie,
      body: { is_paused: true },
      headers: { 'x-leoflow-csrf': '1', origin: 'http://attacker.example' },
    });
    expect(crossOrigin.statusCode).toBe(403);
    const crossSite = await inject('PATCH', url, {
      cookie,
      body: { is_paused: true },
      headers: { 'x-leoflow-csrf': '1', 'sec-fetch-site': 'cross-site' },
    });
    expect(crossSite.statusCode).toBe(403);
    const fromApp = await inject('PATCH', url, {
      cookie,
      body: { is_paused: true },
      headers: browser,
    });
    expect(fromApp.statusCode, fromApp.body).toBe(200);
    // Login CSRF: a sign-in without the header is refused as well.
    const forcedLogin = await inject('POST', '/api/ui/session', {
      body: { token: await h.tokenFor('team-d', 'viewer') },
    });
    expect(forcedLogin.statusCode).toBe(403);
    // A bearer token needs none of this.
    expect((await h.request(t.adminToken, 'PATCH', url, { is_paused: false })).status).toBe(200);
  });

  it('a one-time sign-in code works once and not after its lifetime', async () => {
    const token = await h.tokenFor(PLATFORM_TENANT, 'admin');
    const ui = sessions;
    const code = ui.mintSignInCode(token);
    const first = await signIn({ code });
    expect(first.res.statusCode).toBe(200);
    expect((await inject('GET', '/api/v1/whoami', { cookie: first.cookie })).json()).toMatchObject({
      role: 'admin',
    });
    expect((await signIn({ code })).res.statusCode).toBe(401);
    const late = ui.mintSignInCode(token);
    h.clock.advance(60_000);
    expect((await signIn({ code: late })).res.statusCode).toBe(401);
  });

  it('serves the app with a strict CSP at any page path, but never answers under /api/ with it', async () => {
    const page = await inject('GET', '/dags/etl_python/runs/x');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    // Spelled out, not derived from the constant: a laxer policy must turn this red.
    expect(page.headers['content-security-policy']).toBe(
      "default-src 'self';script-src 'self';style-src 'self';img-src 'self' data:;" +
        "font-src 'self';connect-src 'self';object-src 'none';base-uri 'none';" +
        "form-action 'self';frame-ancestors 'none'",
    );
    expect(page.headers['content-security-policy']).toBe(UI_CONTENT_SECURITY_POLICY);
    expect(UI_CONTENT_SECURITY_POLICY).not.toContain('unsafe');
    expectSecurityHeaders(page.headers, 'page');
    // REST replies (a success, a refusal answered by the auth hook, a 404, the docs page that
    // styles itself inline) carry every header but the page's CSP.
    for (const [url, status] of [
      ['/api/v1/health', 200],
      ['/api/v1/dags', 401],
      ['/api/v1/nope', 404],
      ['/api/v1/docs', 200],
    ] as const) {
      const r = await inject('GET', url);
      expect(r.statusCode, url).toBe(status);
      expectSecurityHeaders(r.headers, url);
      expect(r.headers['content-security-policy'], url).toBeUndefined();
    }
    const asset = await inject('GET', '/assets/app-1.js');
    expect(asset.headers['content-type']).toMatch(/javascript/);
    expect(asset.headers['cache-control']).toMatch(/immutable/);
    for (const url of ['/api/v1/nope', '/api/ui/nope', '/api', '/api/']) {
      const r = await inject('GET', url);
      expect(r.statusCode, url).toBe(404);
      expect(r.headers['content-type'], url).toMatch(/application\/json/);
    }
    expect((await inject('GET', '/assets/missing.js')).statusCode).toBe(404);
    expect((await inject('POST', '/dags')).statusCode).toBe(404);
  });

  it('the live stream needs the same authorization as the REST API and names only runs of the caller tenant', async () => {
    const mine = await h.seedTenant('team-e');
    const other = await h.seedTenant('team-f');
    expect((await inject('GET', '/api/ui/events')).statusCode).toBe(401);
    const { cookie } = await signIn({ token: await h.tokenFor('team-e', 'viewer') });
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    const addr = h.app.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    const received: string[] = [];
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      path: '/api/ui/events',
      headers: { cookie, host: `127.0.0.1:${port}` },
    });
    const opened = new Promise<void>((resolve) => {
      req.on('response', (res) => {
        expect(res.statusCode).toBe(200);
        expect(res.headers['content-type']).toMatch(/text\/event-stream/);
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          received.push(chunk);
          if (chunk.includes('event: hello')) resolve();
        });
      });
    });
    req.end();
    await opened;
    await new Promise((r) => setTimeout(r, 200));
    const admin = await h.tokenFor('team-f', 'admin');
    await h.request(admin, 'POST', `/api/v1/dags/${other.dag_id}/runs`, { run_id: 'other_run' });
    await h.request(mine.adminToken, 'POST', `/api/v1/dags/${mine.dag_id}/runs`, {
      run_id: 'my_run',
    });
    await expect.poll(() => received.join(''), { timeout: 5000 }).toContain('my_run');
    expect(received.join('')).not.toContain('other_run');
    expect(received.join('')).not.toContain(other.dag_id);
    // Signing out ends the open stream too, within a few ticks.
    const out = await inject('DELETE', '/api/ui/session', { cookie, headers: browser });
    expect(out.statusCode).toBe(200);
    await expect.poll(() => received.join(''), { timeout: 5000 }).toContain('event: signed-out');
    req.destroy();
  });
});

describe('security headers behind TLS', () => {
  it('pins HTTPS (HSTS) only when the deployment says it speaks TLS', async () => {
    const h = await createApiHarness('sqlite', {
      ui: (clock, store) => ({
        sessions: new UiSessions(store, clock),
        throttle: new SignInThrottle(clock),
        trustedProxies: [],
        allowedHosts: ['127.0.0.1'],
        secureCookies: true,
        staticDir: null,
      }),
    });
    try {
      const r = await h.app.inject({ method: 'GET', url: '/api/v1/health' });
      expect(r.headers['strict-transport-security']).toBe('max-age=31536000');
    } finally {
      await h.close();
    }
  });
});
