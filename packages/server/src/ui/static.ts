import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * The web app's policy: everything from this origin only, no inline script or style, no
 * framing, no plugins; the page works on a closed network because it never names another one.
 */
export const UI_CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The headers every answer carries (REST replies too). */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
};

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

/**
 * Serves the app at `/`: a known file as itself, any other page path as index.html (the app
 * routes in the browser) — but never under /api/, where a wrong path stays a JSON 404, and
 * never for a missing /assets/ file (a stale tab must see the 404, not HTML as script).
 */
export function securityHeaders(req: FastifyRequest, reply: FastifyReply): void {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) void reply.header(k, v);
  if (!req.url.startsWith('/api/')) {
    void reply.header('content-security-policy', UI_CONTENT_SECURITY_POLICY);
  }
}

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
