import { afterAll, beforeAll, expect, it } from 'vitest';
import { isAllowed, isPermission, ROLE_NAMES } from '@leoflow/core';
import { ROUTE_PERMISSIONS } from '../../src/api/route-permissions.js';
import {
  createApiHarness,
  PLATFORM_TENANT,
  type ApiHarness,
  type SeededTenant,
} from '../support/api-harness.js';
import { forEachDialect } from '../support/dialects.js';
import { routeCases } from './route-fixtures.js';

/**
 * Every role × every route × (platform tenant, ordinary tenant), generated from
 * ROUTE_PERMISSIONS: a denied request answers 403 LF_FORBIDDEN before anything is read or
 * validated; an allowed one is never answered 401 or 403.
 */
forEachDialect('authorization matrix', (dialect) => {
  let h: ApiHarness;
  const seeded = new Map<string, SeededTenant>();
  const tokens = new Map<string, string>();

  beforeAll(async () => {
    h = await createApiHarness(dialect);
    for (const tenant of [PLATFORM_TENANT, 'team-a']) {
      seeded.set(tenant, await h.seedTenant(tenant));
      for (const role of ROLE_NAMES)
        tokens.set(`${tenant}/${role}`, await h.tokenFor(tenant, role));
    }
  });
  afterAll(() => h.close());

  it('the table names only known permissions (or public/authenticated)', () => {
    for (const [route, access] of Object.entries(ROUTE_PERMISSIONS)) {
      expect(
        access === 'public' || access === 'authenticated' || isPermission(access),
        `${route}: ${access}`,
      ).toBe(true);
    }
  });

  it('every registered route has an entry, and every entry is a registered route', () => {
    const registered = h.app.documentedRoutes().map((r) => `${r.method} ${r.url}`);
    expect(new Set(registered)).toEqual(new Set(Object.keys(ROUTE_PERMISSIONS)));
  });

  const cases = routeCases().filter((c) => c.access !== 'public');
  for (const tenant of [PLATFORM_TENANT, 'team-a']) {
    for (const role of ROLE_NAMES) {
      for (const c of cases) {
        const allowed =
          c.access === 'authenticated' ||
          (isPermission(c.access) &&
            isAllowed({ role, tenant_id: tenant }, c.access, PLATFORM_TENANT));
        it(`${role}@${tenant === PLATFORM_TENANT ? 'platform' : 'tenant'} ${c.key} → ${allowed ? 'allowed' : 'denied'}`, async () => {
          const t = seeded.get(tenant)!;
          const token = tokens.get(`${tenant}/${role}`)!;
          // Denied requests carry an invalid body on purpose: authorization must come first.
          const body = allowed ? c.body(t) : { definitely: 'not valid' };
          const res = await h.request(token, c.method, c.url(t), body);
          if (allowed) {
            expect([401, 403], `${res.status} ${res.text}`).not.toContain(res.status);
          } else {
            expect(res.status, res.text).toBe(403);
            expect(res.json).toMatchObject({
              code: 'LF_FORBIDDEN',
              details: { permission: c.access },
            });
          }
        });
      }
    }
  }

  it('without a token, every non-public route answers 401 with the fix in the message', async () => {
    for (const c of cases) {
      const res = await h.request(
        null,
        c.method,
        c.url(seeded.get('team-a')!),
        c.body(seeded.get('team-a')!),
      );
      expect(res.status, c.key).toBe(401);
      expect(res.json).toMatchObject({
        code: 'LF_UNAUTHENTICATED',
        message: expect.stringContaining('LEOFLOW_TOKEN'),
      });
    }
  });

  it('public routes need no token', async () => {
    for (const url of ['/api/v1/health', '/api/v1/openapi.json', '/api/v1/docs']) {
      expect((await h.request(null, 'GET', url)).status, url).toBe(200);
    }
  });

  it('?reveal=true on a secret variable needs variables:reveal on top of variables:read', async () => {
    // The matrix above may have deleted the seeded variable: plant a fresh one.
    const value = 'reveal-canary-7d1f';
    const put = await h.request(tokens.get('team-a/admin')!, 'PUT', '/api/v1/variables/revealme', {
      value,
      secret: true,
    });
    expect(put.status).toBe(200);
    const url = '/api/v1/variables/revealme?reveal=true';
    for (const role of ROLE_NAMES) {
      const res = await h.request(tokens.get(`team-a/${role}`)!, 'GET', url);
      if (role === 'admin') expect(res.json).toMatchObject({ value, masked: false });
      else {
        expect(res.status, role).toBe(403);
        expect(res.text).not.toContain(value);
      }
      const masked = await h.request(
        tokens.get(`team-a/${role}`)!,
        'GET',
        '/api/v1/variables/revealme',
      );
      expect(masked.json).toMatchObject({ value: '***', masked: true });
    }
  });
});
