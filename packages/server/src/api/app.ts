import Fastify, { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import {
  assertJsonDepth,
  httpStatusOf,
  isLeoflowError,
  isPermission,
  MAX_REST_BODY_BYTES,
  type Clock,
} from '@leoflow/core';
import type { Logger } from 'pino';
import type { ApiTokens } from '../auth/api-tokens.js';
import type { UserPrincipal } from '../auth/user-token.js';
import type { PlatformAdmin } from './tenancy/platform.js';
import type { TenantScope, TenantScopes } from './tenancy/tenant-scope.js';
import { registerAdminRoutes } from './admin-routes.js';
import { requirePermission, type AuthzContext } from './authz.js';
import { registerDagRoutes } from './dag-routes.js';
import { buildOpenApiDocument, renderDocsPage, type DocumentedRoute } from './openapi.js';
import {
  AUTHENTICATED,
  PUBLIC,
  ROUTE_PERMISSIONS,
  routeKey,
  type RouteAccess,
} from './route-permissions.js';
import { registerRunRoutes } from './run-routes.js';
import { registerRunnerRoutes, type RunnerRouteDeps } from './runner-routes.js';
import { registerVaultRoutes } from './vault-routes.js';
import { registerGrantRoutes } from './grant-routes.js';
import { authenticateRequest, type UiDeps } from './web-session/guard.js';
import {
  registerUiRoutes,
  rememberAuthentication,
  UI_ROUTE_PERMISSIONS,
} from './web-session/routes.js';
import fastifyHelmet from '@fastify/helmet';
import {
  API_ROUTE_HELMET,
  extraSecurityHeaders,
  helmetOptions,
  loadAssets,
  pageServer,
} from './web-session/static.js';
import { registerProbeRoutes } from './probes/probe-routes.js';
import type { Readiness } from './probes/readiness.js';
import { isDiskFull } from './disk-full.js';

/**
 * What the REST API is built from. Deliberately no Store: request handlers reach data only
 * through the TenantScope of the authenticated principal, or PlatformAdmin behind a platform
 * permission.
 */
export interface ApiDeps {
  scopes: TenantScopes;
  tokens: ApiTokens;
  platform: PlatformAdmin;
  /** runner records (tenant) and cells with placements (platform), in the directory */
  directory: RunnerRouteDeps;
  /** the tenant whose admins hold the platform permissions (standalone: "default") */
  platformTenantId: string;
  clock: Clock;
  logger: Logger;
  version: string;
  onChange: () => void;
  /** tests: observe every reply (e.g. to validate it against the OpenAPI document) */
  onReply?: (r: { method: string; url: string; status: number; body: string }) => void;
  /** request and idle timeouts (defaults: REST_TIMEOUTS) */
  timeouts?: Partial<RestTimeouts>;
  /** the web app: pages at `/`, the session cookie, the live stream (absent: API only) */
  ui?: UiDeps;
  /** /healthz and /readyz (api/probes/probe-routes.ts); absent: no probe routes */
  readiness?: () => Promise<Readiness>;
}

export interface RestTimeouts {
  /** the whole request — headers and body — must arrive within this (slow-body senders) */
  requestMs: number;
  /** a connection with no bytes in either direction for this long is closed */
  idleMs: number;
}

/** Defaults of the REST server's timeouts (docs/api.md). */
export const REST_TIMEOUTS: RestTimeouts = { requestMs: 30_000, idleMs: 60_000 };

declare module 'fastify' {
  interface FastifyRequest {
    principal: UserPrincipal;
    scope: TenantScope;
    authz: AuthzContext;
  }
  interface FastifyContextConfig {
    access?: RouteAccess;
  }
  interface FastifySchema {
    /** one line for the OpenAPI document and the docs page */
    summary?: string;
  }
}

const UNAUTHENTICATED = {
  code: 'LF_UNAUTHENTICATED',
  message:
    'missing, invalid, expired or revoked API token; pass --token or set LEOFLOW_TOKEN ' +
    '(standalone writes an admin token to <data-dir>/admin.token; mint others with `leoflow auth create-token`)',
  details: {},
};

/** Longest path parameter the router matches: 250 characters, each percent-encoded (3 bytes). */
export const MAX_PATH_PARAM_LENGTH = 750;

export function buildApi(deps: ApiDeps) {
  const { scopes, tokens } = deps;
  const authz: AuthzContext = { platformTenantId: deps.platformTenantId };
  const timeouts = { ...REST_TIMEOUTS, ...deps.timeouts };
  const app = Fastify({
    loggerInstance: deps.logger.child({ component: 'api' }),
    // Per-request access logs would drown the scheduler's lines in a one-process Lite.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: MAX_REST_BODY_BYTES,
    // A body trickled a byte at a time is cut off when the whole request has not arrived within
    // requestMs; Node checks pending requests every connectionsCheckingInterval.
    requestTimeout: timeouts.requestMs,
    connectionTimeout: timeouts.idleMs,
    http: {
      headersTimeout: timeouts.requestMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, timeouts.requestMs / 4)),
    },
    // HEAD twins would be routes without a decision in the permission table.
    exposeHeadRoutes: false,
    // Path ids are up to 250 characters (the documented patterns), percent-encoded up to three
    // bytes each: Fastify's 100 refused a 101-character Variable key with its own 414.
    routerOptions: { maxParamLength: MAX_PATH_PARAM_LENGTH },
    // The router's own refusals answer with an LF_ code like every other refusal.
    frameworkErrors: (err, _req, frameworkReply) => {
      const reply = frameworkReply as unknown as FastifyReply;
      const code = (err as { code?: string }).code;
      if (code === 'FST_ERR_MAX_PARAM_LENGTH') {
        void reply.status(httpStatusOf('LF_PATH_PARAM_TOO_LONG')).send({
          code: 'LF_PATH_PARAM_TOO_LONG',
          message: `a path segment is over ${MAX_PATH_PARAM_LENGTH} characters; ids are at most 250 characters`,
          details: { limit: MAX_PATH_PARAM_LENGTH },
        });
        return;
      }
      void reply.status(400).send({
        code: 'LF_BAD_REQUEST',
        message:
          code === 'FST_ERR_BAD_URL' ? 'the URL path is not valid percent-encoding' : 'bad request',
        details: {},
      });
    },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', allErrors: true } },
  });

  // JSON bodies nested deeper than MAX_JSON_DEPTH are refused (400 LF_JSON_TOO_DEEP) before they
  // are parsed: a recursive walk of one (validation, JSON.stringify) would overflow the stack.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    try {
      assertJsonDepth(text, 'the request body');
    } catch (err) {
      done(err as Error, undefined);
      return;
    }
    void parseJson(req, text, done);
  });

  // Security headers (the web app's CSP on pages) before any hook below can answer, so a 401
  // carries them too: Fastify applies hooks and plugins in the order they are declared.
  if (deps.ui) void app.register(fastifyHelmet, helmetOptions(deps.ui.secureCookies));

  app.decorateRequest('principal', null as unknown as UserPrincipal);
  app.decorateRequest('scope', null as unknown as TenantScope);
  app.decorateRequest('authz', null as unknown as AuthzContext);

  // Every route must have a decision in ROUTE_PERMISSIONS; one without fails at build time.
  const documented: DocumentedRoute[] = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      const key = routeKey(method, route.url);
      const access = ROUTE_PERMISSIONS[key] ?? UI_ROUTE_PERMISSIONS[key];
      if (access === undefined) {
        throw new Error(
          `route ${key} has no entry in ROUTE_PERMISSIONS (api/route-permissions.ts)`,
        );
      }
      route.config = {
        ...(route.config ?? {}),
        access,
        ...(deps.ui && route.url.startsWith('/api') ? { helmet: API_ROUTE_HELMET } : {}),
      };
      if (ROUTE_PERMISSIONS[key] === undefined) continue;
      documented.push({
        method,
        url: route.url,
        access,
        schema: (route.schema ?? {}) as DocumentedRoute['schema'],
      });
    }
  });

  // Authentication and authorization run before the body is parsed or validated, so a caller
  // without the permission learns nothing from validation errors or lookups.
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const access = req.routeOptions.config.access;
    if (access === undefined || access === PUBLIC) return;
    // A bearer token, or the web app's session cookie (../ui/guard.ts): one authentication path.
    const auth = await authenticateRequest(req, tokens, deps.ui);
    if (!auth) return reply.status(httpStatusOf(UNAUTHENTICATED.code)).send(UNAUTHENTICATED);
    if ('status' in auth) return reply.status(auth.status).send(auth.body);
    const { principal } = auth;
    rememberAuthentication(req, auth);
    req.principal = principal;
    req.authz = authz;
    req.scope = scopes.forTenant(principal.tenant_id);
    if (access !== AUTHENTICATED && isPermission(access)) await requirePermission(req, access);
  });

  if (deps.onReply) {
    const observe = deps.onReply;
    app.addHook('onSend', (req, reply, payload, done) => {
      observe({
        method: req.method,
        url: req.routeOptions.url ?? '',
        status: reply.statusCode,
        body: typeof payload === 'string' ? payload : '',
      });
      done(null, payload);
    });
  }

  app.setErrorHandler((err, req, reply) => {
    if (isLeoflowError(err)) {
      return reply
        .status(httpStatusOf(err.code))
        .send({ code: err.code, message: err.message, details: err.details ?? {} });
    }
    const e = err as { validation?: unknown; statusCode?: number; message: string };
    if (e.validation) {
      return reply.status(httpStatusOf('LF_BAD_REQUEST')).send({
        code: 'LF_BAD_REQUEST',
        message: `invalid request: ${e.message}`,
        details: { validation: e.validation },
      });
    }
    // Fastify's own errors carry their status (FST_ERR_CTP_BODY_TOO_LARGE is 413); classify by it.
    if (e.statusCode === 413) {
      return reply.status(httpStatusOf('LF_BODY_TOO_LARGE')).send({
        code: 'LF_BODY_TOO_LARGE',
        message: `the request body is over the ${MAX_REST_BODY_BYTES} byte (8 MiB) limit`,
        details: { limit_bytes: MAX_REST_BODY_BYTES },
      });
    }
    // Other client errors Fastify raised itself (415, 400 on a bad JSON body, …) keep Fastify's
    // status under the one code for a malformed request.
    if (e.statusCode && e.statusCode < 500) {
      return reply
        .status(e.statusCode)
        .send({ code: 'LF_BAD_REQUEST', message: e.message, details: {} });
    }
    if (isDiskFull(err)) {
      req.log.error({ err }, 'request refused: the store is out of space');
      return reply.status(httpStatusOf('LF_STORE_DISK_FULL')).send({
        code: 'LF_STORE_DISK_FULL',
        message:
          "the store could not write: its filesystem is full. Nothing of this request was written; free space on the database's filesystem (Lite: the data dir's) and retry",
        details: {},
      });
    }
    req.log.error({ err }, 'request failed');
    return reply
      .status(httpStatusOf('LF_INTERNAL'))
      .send({ code: 'LF_INTERNAL', message: 'internal error; see the server log', details: {} });
  });

  let servePage: ReturnType<typeof pageServer> | null = null;
  if (deps.ui) {
    servePage = pageServer(deps.ui.staticDir ? loadAssets(deps.ui.staticDir) : null);
    app.addHook('onSend', (req, reply, payload, done) => {
      extraSecurityHeaders(req, reply);
      done(null, payload);
    });
  }

  app.setNotFoundHandler((req, reply) => {
    // Runner paths belong to the door alone (docs/runners.md): never the web app's page here.
    const runnerPath = req.url === '/runners' || req.url.startsWith('/runners/');
    if (!runnerPath && servePage?.(req, reply)) return;
    // A not-found answer has no route (so no API_ROUTE_HELMET): helmet gave it the page's CSP.
    if (deps.ui) reply.raw.removeHeader('content-security-policy');
    void reply.status(httpStatusOf('LF_ROUTE_NOT_FOUND')).send({
      code: 'LF_ROUTE_NOT_FOUND',
      message: runnerPath
        ? 'runner paths are served by the door (its own port), not by the REST API'
        : `no route ${req.method} ${req.url.split('?')[0] ?? ''}; the routes are listed at /api/v1/docs`,
      details: {},
    });
  });

  app.get(
    '/api/v1/health',
    {
      schema: {
        summary: 'Liveness of the REST API',
        response: {
          200: {
            type: 'object',
            properties: { status: { type: 'string' }, version: { type: 'string' } },
          },
        },
      },
    },
    () => Promise.resolve({ status: 'ok', version: deps.version }),
  );

  const readiness = deps.readiness;
  if (readiness) {
    void app.register((probes, _opts, done) => {
      registerProbeRoutes(probes, readiness);
      done();
    });
  }

  let openApi: ReturnType<typeof buildOpenApiDocument> | null = null;
  const document = () => (openApi ??= buildOpenApiDocument(documented, deps.version));

  app.get(
    '/api/v1/openapi.json',
    {
      schema: {
        summary: 'This API as an OpenAPI 3.1 document',
        response: { 200: { type: 'object', additionalProperties: true } },
      },
    },
    () => Promise.resolve(document()),
  );

  app.get('/api/v1/docs', { schema: { summary: 'This API as a readable page' } }, (_req, reply) =>
    reply.type('text/html; charset=utf-8').send(renderDocsPage(document())),
  );

  void app.register((api, _opts, done) => {
    registerDagRoutes(api, { onChange: deps.onChange });
    registerRunRoutes(api);
    registerVaultRoutes(api, { clock: deps.clock });
    registerGrantRoutes(api);
    registerRunnerRoutes(api, deps.directory);
    registerAdminRoutes(api, {
      platform: deps.platform,
      scopes,
      platformTenantId: deps.platformTenantId,
    });
    if (deps.ui) {
      const ui = registerUiRoutes(api, { ui: deps.ui, tokens, scopes, logger: deps.logger });
      api.addHook('onClose', (_i, next) => {
        ui.close();
        next();
      });
    }
    done();
  });

  return Object.assign(app, { documentedRoutes: () => [...documented] as const });
}
