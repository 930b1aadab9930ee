import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import type { FastifyHelmetOptions } from '@fastify/helmet';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * The web app's policy: everything from this origin only, no inline script or style, no
 * framing, no plugins; the page works on a closed network because it never names another one.
 * Helmet writes it without defaults of its own (`useDefaults: false`), so this is all of it.
 */
export const UI_CSP_DIRECTIVES: Readonly<Record<string, readonly string[]>> = {
  'default-src': ["'self'"],
  'script-src': ["'self'"],
  'style-src': ["'self'"],
  'img-src': ["'self'", 'data:'],
  'font-src': ["'self'"],
  'connect-src': ["'self'"],
  'object-src': ["'none'"],
  'base-uri': ["'none'"],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
};

/** The header value as helmet writes it (directives joined by `;`). */
export const UI_CONTENT_SECURITY_POLICY = Object.entries(UI_CSP_DIRECTIVES)
  .map(([name, values]) => `${name} ${values.join(' ')}`)
  .join(';');

/** Helmet has no Permissions-Policy; the app uses none of these features. */
export const PERMISSIONS_POLICY = 'camera=(), microphone=(), geolocation=(), payment=(), usb=()';

/**
 * @fastify/helmet's options for every answer (REST replies too). Helmet's defaults stay on
 * (nosniff, COOP and CORP same-origin, Origin-Agent-Cluster, X-DNS-Prefetch-Control off,
 * X-Download-Options, X-Permitted-Cross-Domain-Policies none, X-XSS-Protection 0, no
 * X-Powered-By) with two made stricter (Referrer-Policy no-referrer, X-Frame-Options DENY).
 * HSTS only when the deployment says it speaks TLS (LEOFLOW_UI_SECURE_COOKIES=1): over plain
 * HTTP browsers ignore it, and pinning a name to HTTPS is the operator's decision.
 */
export function helmetOptions(tls: boolean): FastifyHelmetOptions {
  return {
    global: true,
    contentSecurityPolicy: {
      useDefaults: false,
      directives: Object.fromEntries(
        Object.entries(UI_CSP_DIRECTIVES).map(([k, v]) => [k, [...v]]),
      ),
    },
    referrerPolicy: { policy: 'no-referrer' },
    xFrameOptions: { action: 'deny' },
    strictTransportSecurity: tls ? { maxAge: 31_536_000, includeSubDomains: false } : false,
  };
}

/**
 * What REST routes tell helmet: the same headers without the page's CSP (a JSON reply runs
 * nothing, and the /api/v1/docs page styles itself inline).
 */
export const API_ROUTE_HELMET = { contentSecurityPolicy: false } as const;

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

interface Asset {
  body: Buffer;
  type: string;
  immutable: boolean;
}

/** Reads the built app once (it is small) so serving never touches the file system. */
export function loadAssets(dir: string): Map<string, Asset> | null {
  if (!existsSync(join(dir, 'index.html'))) return null;
  const out = new Map<string, Asset>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else {
        const url = `/${relative(dir, p).split(sep).join('/')}`;
        out.set(url, {
          body: readFileSync(p),
          type: TYPES[extname(p)] ?? 'application/octet-stream',
          // Vite names built assets by content hash.
          immutable: url.startsWith('/assets/'),
        });
      }
    }
  };
  walk(dir);
  return out;
}

/** The one header helmet does not set. */
export function extraSecurityHeaders(_req: FastifyRequest, reply: FastifyReply): void {
  void reply.header('permissions-policy', PERMISSIONS_POLICY);
}

/**
 * Serves the app at `/`: a known file as itself, any other page path as index.html (the app
 * routes in the browser) — but never under /api/, where a wrong path stays a JSON 404, and
 * never for a missing /assets/ file (a stale tab must see the 404, not HTML as script).
 */
export function pageServer(assets: Map<string, Asset> | null) {
  return function serve(req: FastifyRequest, reply: FastifyReply): boolean {
    if (!assets || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
    const path = (req.url.split('?')[0] ?? '/').split('#')[0] ?? '/';
    if (path === '/api' || path.startsWith('/api/')) return false;
    let asset = assets.get(path);
    if (!asset) {
      if (path.startsWith('/assets/')) return false;
      asset = assets.get('/index.html');
      if (!asset) return false;
    }
    void reply
      .status(200)
      .header('content-type', asset.type)
      .header('cache-control', asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
      .send(req.method === 'HEAD' ? '' : asset.body);
    return true;
  };
}
