import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { ApiTokens } from '../../auth/api-tokens.js';
import { auditRequest } from '../audit.js';
import { checkPermission } from '../authz.js';
import { AUTHENTICATED, PUBLIC, type RouteAccess } from '../route-permissions.js';
import { errorSchema } from '../schemas.js';
import { logLineOut } from '../serialize.js';
import type { TenantScopes } from '../tenancy/tenant-scope.js';
import { ChangeFeed, type UiEvent } from './events.js';
import { signInSource } from './sign-in-throttle.js';
import {
  authenticateRequest,
  checkBrowserRequest,
  SESSION_COOKIE,
  sessionCookie,
  type UiDeps,
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

const live = new WeakMap<
  FastifyRequest,
  { session: string | null; stillValid: () => Promise<boolean> }
>();

/** Remembers how a request authenticated (the stream re-checks it; sign-out needs the session). */
export function rememberAuthentication(
  req: FastifyRequest,
  a: { session: string | null; stillValid: () => Promise<boolean> },
): void {
  live.set(req, a);
}

export interface UiRouteDeps {
  ui: UiDeps;
  tokens: ApiTokens;
  scopes: TenantScopes;
  logger: Logger;
}

export function registerUiRoutes(api: FastifyInstance, d: UiRouteDeps): { close(): void } {
  const { ui, tokens } = d;
  const interval = ui.eventsIntervalMs ?? 1000;
  const feed = new ChangeFeed(d.scopes, interval, d.logger);

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
      const body = (req.body ?? {}) as { token?: string; code?: string };
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
      const session = live.get(req)?.session ?? null;
      const closed = session !== null && (await ui.sessions.close(session));
      if (closed)
        await auditRequest(req, 'ui.sign_out', { type: 'api_token', id: req.principal.jti });
      void reply.header('set-cookie', sessionCookie(ui, '', 0));
      return { signed_out: closed };
    },
  );

  api.get(
    '/api/ui/events',
    {
      schema: {
        summary: 'Web app live stream (server-sent events): changes, and the log of one try',
        querystring: {
          type: 'object',
          properties: {
            dag_id: { type: 'string', minLength: 1 },
            run_id: { type: 'string', minLength: 1 },
            task_id: { type: 'string', minLength: 1 },
            try: { type: 'integer', minimum: 1 },
            map_index: { type: 'integer', minimum: -1 },
          },
          additionalProperties: false,
        },
      },
    },
    (req, reply) => {
      const q = req.query as {
        dag_id?: string;
        run_id?: string;
        task_id?: string;
        try?: number;
        map_index?: number;
      };
      const follow =
        q.dag_id !== undefined && q.run_id !== undefined && q.task_id !== undefined
          ? {
              dag_id: q.dag_id,
              run_id: q.run_id,
              task_id: q.task_id,
              try: q.try,
              ...(q.map_index !== undefined ? { map_index: q.map_index } : {}),
            }
          : null;
      // Following a log needs what reading it over REST needs.
      if (follow) checkPermission(req.principal, 'logs:read', req.authz);
      stream(req, reply, follow);
    },
  );

  function stream(
    req: FastifyRequest,
    reply: FastifyReply,
    follow: {
      dag_id: string;
      run_id: string;
      task_id: string;
      try: number | undefined;
      map_index?: number;
    } | null,
  ): void {
    const auth = live.get(req);
    const scope = req.scope;
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    });
    let closed = false;
    const send = (event: string, data: unknown) => {
      if (!closed) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    send('hello', { interval_ms: interval });
    const onlyDag = (req.query as { dag_id?: string }).dag_id;
    const unsubscribe = feed.subscribe(req.principal.tenant_id, (e: UiEvent) => {
      if (e.type === 'run' && onlyDag !== undefined && e.dag_id !== onlyDag) return;
      send(e.type, e);
    });

    let afterLine = 0;
    let tryNumber = follow?.try;
    let logDone = false;
    let ticks = 0;
    let busy = false;
    const timer = setInterval(() => {
      if (busy) return;
      busy = true;
      void (async () => {
        ticks += 1;
        // The credential behind the stream is re-checked: revoking the token or signing out
        // ends the stream within seconds.
        if (ticks % 5 === 0 && auth && !(await auth.stillValid())) {
          send('signed-out', {});
          end();
          return;
        }
        if (follow && !logDone) {
          const out = await scope.readLogs(follow.dag_id, follow.run_id, follow.task_id, {
            ...(tryNumber !== undefined ? { try: tryNumber } : {}),
            ...(follow.map_index !== undefined ? { map_index: follow.map_index } : {}),
            after_line: afterLine,
            limit: 1000,
          });
          tryNumber = out.tryNumber;
          const ti = out.taskInstance;
          const finished =
            out.tryNumber < ti.try_number ||
            !['none', 'scheduled', 'queued', 'running'].includes(ti.state);
          if (out.lines.length > 0) {
            afterLine = out.lines[out.lines.length - 1]?.line_number ?? afterLine;
            send('log', { try_number: out.tryNumber, lines: out.lines.map(logLineOut) });
          } else if (finished) {
            logDone = true;
            send('log-end', { try_number: out.tryNumber });
          }
        }
        if (ticks % 15 === 0) res.write(': keep-alive\n\n');
      })()
        .catch((err: unknown) => {
          d.logger.warn({ err }, 'live stream tick failed');
          send('stream-error', { message: 'the live stream failed; reload the page' });
          end();
        })
        .finally(() => (busy = false));
    }, interval);
    const end = () => {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      unsubscribe();
      res.end();
    };
    req.raw.on('close', end);
    res.on('close', end);
  }

  return { close: () => feed.close() };
}

export { authenticateRequest, SESSION_COOKIE };
