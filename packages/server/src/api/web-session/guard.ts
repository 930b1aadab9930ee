import type { FastifyRequest } from 'fastify';
import type { ApiTokens } from '../../auth/api-tokens.js';
import type { UserPrincipal } from '../../auth/user-token.js';
import type { UiSessions } from './sessions.js';
import type { SignInThrottle } from './sign-in-throttle.js';

export const SESSION_COOKIE = 'leoflow_session';
/** The header the web app sends on every state-changing request (a CSRF defence). */
export const CSRF_HEADER = 'x-leoflow-csrf';

/** What the REST API needs to serve the web app and accept its session cookie. */
export interface UiDeps {
  sessions: UiSessions;
  /** failed sign-ins per source address (api/web-session/sign-in-throttle.ts) */
  throttle: SignInThrottle;
  /** proxy addresses whose X-Forwarded-For names the client (LEOFLOW_UI_TRUSTED_PROXIES); none by default */
  trustedProxies: readonly string[];
  /** host names (no port) browsers may use to reach this server; anything else is refused */
  allowedHosts: readonly string[];
  /** mark the cookie Secure (the server, or the proxy in front of it, speaks TLS) */
  secureCookies: boolean;
  /** the built web app (packages/ui/dist); null serves no pages */
  staticDir: string | null;
  /** how often the live stream looks for changes (default 1000 ms) */
  eventsIntervalMs?: number;
}

export interface Refusal {
  status: 401 | 403;
  body: { code: string; message: string; details: Record<string, unknown> };
}

export type Authentication =
  | { principal: UserPrincipal; session: string | null; stillValid: () => Promise<boolean> }
  | Refusal
  | null;

export function readCookie(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim() || null;
  }
  return null;
}

/** The host name of a Host header value (`example.org:8080` → `example.org`, `[::1]:80` → `[::1]`). */
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  return colon < 0 ? h : h.slice(0, colon);
}

const refuse = (status: 401 | 403, code: string, message: string): Refusal => ({
  status,
  body: { code, message, details: {} },
});

/**
 * The checks every cookie-carrying request passes before its session is looked at:
 * the Host header names this server (a DNS-rebinding page cannot ride the cookie), and a
 * state-changing request carries the app's CSRF header and, when the browser says where it
 * comes from (Origin, Sec-Fetch-Site), comes from this very origin.
 */
export function checkBrowserRequest(req: FastifyRequest, ui: UiDeps): Refusal | null {
  const host = req.headers.host ?? '';
  if (!ui.allowedHosts.includes(hostName(host))) {
    return refuse(
      403,
      'LF_HOST_NOT_ALLOWED',
      'this server is not configured to answer browsers under the host name in the request; ' +
        'add the name to LEOFLOW_UI_HOSTS (comma-separated) if it is really yours',
    );
  }
  if (req.method === 'GET' || req.method === 'HEAD') return null;
  if (req.headers[CSRF_HEADER] !== '1') {
    return refuse(
      403,
      'LF_CSRF',
      `a state-changing request with the session cookie must carry the ${CSRF_HEADER} header; use the web app, or a bearer token from scripts`,
    );
  }
  const origin = req.headers.origin;
  if (origin !== undefined && !sameHost(origin, host)) {
    return refuse(403, 'LF_CSRF', 'cross-origin request refused; use the web app itself');
  }
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') {
    return refuse(403, 'LF_CSRF', 'cross-site request refused; use the web app itself');
  }
  return null;
}

function sameHost(origin: string, host: string): boolean {
  try {
    return new URL(origin).host.toLowerCase() === host.trim().toLowerCase();
  } catch {
    return false;
  }
}

/**
 * Who is calling: a bearer token (scripts, the CLI) or, for the web app, the session cookie —
 * both end in the same ApiTokens.authenticate, so roles, tenant scoping and revocation are one
 * path. A request with an Authorization header is judged by it alone.
 */
export async function authenticateRequest(
  req: FastifyRequest,
  tokens: ApiTokens,
  ui: UiDeps | undefined,
): Promise<Authentication> {
  const header = req.headers.authorization;
  if (header !== undefined || !ui) {
    const m = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    const token = m?.[1];
    const principal = token ? await tokens.authenticate(token) : null;
    if (!principal || !token) return null;
    return {
      principal,
      session: null,
      stillValid: async () => (await tokens.authenticate(token)) !== null,
    };
  }
  const session = readCookie(req.headers.cookie, SESSION_COOKIE);
  if (session === null) return null;
  const refusal = checkBrowserRequest(req, ui);
  if (refusal) return refusal;
  // The session names its token by jti; the token's record decides, as for a bearer.
  const live = async () => {
    const held = await ui.sessions.principalOf(session);
    return held ? tokens.stillOnRecord(held) : null;
  };
  const principal = await live();
  if (!principal) return null;
  return { principal, session, stillValid: async () => (await live()) !== null };
}

export function sessionCookie(ui: UiDeps, id: string, maxAgeSeconds: number): string {
  return [
    `${SESSION_COOKIE}=${id}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}`,
    ...(ui.secureCookies ? ['Secure'] : []),
  ].join('; ');
}
