import type { FastifyInstance } from 'fastify';

import { auditRequest } from '../audit.js';

import { AUTHENTICATED, PUBLIC, type RouteAccess } from '../route-permissions.js';
import { errorSchema } from '../schemas.js';

import { signInSource } from './sign-in-throttle.js';
import { registerEventStream } from './event-stream.js';
import type { UiRouteDeps } from './route-deps.js';

export type { UiRouteDeps };
import { rememberAuthentication, rememberedAuthentication } from './remembered-auth.js';
import { typedApi } from '../typed-routes.js';
import {
  authenticateRequest,
  checkBrowserRequest,
  SESSION_COOKIE,
  sessionCookie,
} from './guard.js';

/**
 * The web app's own endpoints (sign-in, sign-out, live stream). They sit under /api/ (so the
 * page fallback never answers there) but outside /api/v1: they are the browser's plumbing, not
 * part of the documented REST API. Each has its decision here, like ROUTE_PERMISSIONS.
 */
export const UI_ROUTE_PERMISSIONS: Readonly<Record<string, RouteAccess>> = {
  'POST /api/ui/session': PUBLIC,
  'DELETE /api/ui/session': AUTHENTICATED,
  'GET /api/ui/events': 'runs:read',
};

export function registerUiRoutes(app: FastifyInstance, d: UiRouteDeps): { close(): void } {
  const api = typedApi(app);
  const { ui, tokens } = d;

  api.post(
    '/api/ui/session',
    {
      schema: {
        summary: 'Web app sign-in: exchange an API token or a one-time code for a session cookie',
        body: {
          type: 'object',
          properties: {
            token: { type: 'string', minLength: 1, maxLength: 8192 },
            code: { type: 'string', minLength: 1, maxLength: 200 },
          },
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            properties: {
              subject: { type: 'string' },
              tenant_id: { type: 'string' },
              role: { type: 'string' },
              expires_at: { type: 'string' },
            },
          },
          400: errorSchema,
          401: errorSchema,
          403: errorSchema,
          429: errorSchema,
        },
      },
    },
    async (req, reply) => {
      const refusal = checkBrowserRequest(req, ui);
      if (refusal) return reply.status(refusal.status).send(refusal.body);
      // Throttled before the token or code is looked at: a refused guess learns nothing and
      // spends no code.
      const source = signInSource(req, ui.trustedProxies);
      const wait = ui.throttle.retryAfterSeconds(source);
      if (wait > 0) {
        return reply
          .status(429)
          .header('retry-after', String(wait))
          .send({
            code: 'LF_SIGN_IN_THROTTLED',
            message: `too many failed sign-ins from this address; try again in ${wait} seconds`,
            details: { retry_after_seconds: wait },
          });
      }
      const body = req.body ?? {};
      const token = body.code !== undefined ? ui.sessions.redeem(body.code) : (body.token ?? null);
      const principal = token ? await tokens.authenticate(token) : null;
      if (!principal || !token) {
        ui.throttle.recordFailure(source);
        if (ui.throttle.retryAfterSeconds(source) > 0) {
          d.logger.warn({ source }, 'web app sign-in throttled after repeated failures');
        }
        return reply.status(401).send({
          code: 'LF_UNAUTHENTICATED',
          message:
            body.code !== undefined
              ? 'this sign-in link was used already or has expired; restart standalone for a new one, or paste an API token'
              : 'that API token is not valid (expired, revoked or mistyped); mint one with `leoflow auth create-token`',
          details: {},
        });
      }
      const s = await ui.sessions.open(principal, await tokens.expiryOf(token));
      req.principal = principal;
      req.scope = d.scopes.forTenant(principal.tenant_id);
      await auditRequest(
        req,
        'ui.sign_in',
        { type: 'api_token', id: principal.jti },
        {
          via: body.code !== undefined ? 'sign-in-code' : 'token',
        },
      );
      void reply.header('set-cookie', sessionCookie(ui, s.id, s.maxAgeMs / 1000));
      return {
        subject: principal.subject,
        tenant_id: principal.tenant_id,
        role: principal.role,
        expires_at: new Date(s.expiresAt).toISOString(),
      };
    },
  );

  api.delete(
    '/api/ui/session',
    {
      schema: {
        summary: 'Web app sign-out: the session ends on the server and the cookie is cleared',
        response: { 200: { type: 'object', properties: { signed_out: { type: 'boolean' } } } },
      },
    },
    async (req, reply) => {
      const session = rememberedAuthentication(req)?.session ?? null;
      const closed = session !== null && (await ui.sessions.close(session));
      if (closed)
        await auditRequest(req, 'ui.sign_out', { type: 'api_token', id: req.principal.jti });
      void reply.header('set-cookie', sessionCookie(ui, '', 0));
      return { signed_out: closed };
    },
  );

  return registerEventStream(app, d);
}

export { authenticateRequest, rememberAuthentication, SESSION_COOKIE };
