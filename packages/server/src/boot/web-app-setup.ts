import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Clock } from '@leoflow/core';
import type { ServerConfig } from '../config/server-config.js';
import type { UiSessionStore } from '../store/ports/ui-sessions.js';
import type { UiDeps } from '../api/web-session/guard.js';
import { UiSessions } from '../api/web-session/sessions.js';
import { normaliseAddress, SignInThrottle } from '../api/web-session/sign-in-throttle.js';

/** Where the monorepo builds the web app: packages/ui/dist beside packages/server. */
export function defaultUiDir(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '../../../ui/dist');
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];

/**
 * The names browsers may use: loopback ones, the listen address when it is a name or a
 * specific address, and LEOFLOW_UI_HOSTS (comma-separated) for what a proxy or DNS adds.
 * A wildcard listen address adds nothing: a rebinding page's name is never trusted.
 */
export function allowedUiHosts(listenHost: string, env: NodeJS.ProcessEnv): string[] {
  const names = new Set(LOOPBACK_NAMES);
  const h = listenHost.trim().toLowerCase();
  if (h !== '' && h !== '0.0.0.0' && h !== '::' && h !== '[::]') {
    names.add(h.includes(':') && !h.startsWith('[') ? `[${h}]` : h);
  }
  for (const n of (env.LEOFLOW_UI_HOSTS ?? '').split(',')) {
    if (n.trim() !== '') names.add(n.trim().toLowerCase());
  }
  return [...names];
}

export function uiForControlPlane(
  cfg: ServerConfig,
  clock: Clock,
  env: NodeJS.ProcessEnv,
  store: UiSessionStore,
) {
  const dir = env.LEOFLOW_UI_DIR ?? defaultUiDir();
  const deps: UiDeps = {
    sessions: new UiSessions(store, clock),
    throttle: new SignInThrottle(clock),
    // Only a proxy the operator names may say where a sign-in comes from.
    trustedProxies: (env.LEOFLOW_UI_TRUSTED_PROXIES ?? '')
      .split(',')
      .map((a) => a.trim())
      .filter((a) => a !== '')
      .map(normaliseAddress),
    allowedHosts: allowedUiHosts(cfg.http.host, env),
    // Set when a TLS-terminating proxy fronts the API (it does not speak TLS itself).
    secureCookies: env.LEOFLOW_UI_SECURE_COOKIES === '1',
    staticDir: existsSync(join(dir, 'index.html')) ? dir : null,
  };
  return {
    deps,
    /** A one-time sign-in URL for the token in `tokenFile`: the code rides in the fragment, which browsers never send. */
    signInUrl(base: string, tokenFile: string): string | null {
      if (!existsSync(tokenFile)) return null;
      const token = readFileSync(tokenFile, 'utf8').trim();
      if (token === '') return null;
      return `${base}/sign-in#code=${deps.sessions.mintSignInCode(token)}`;
    },
  };
}
