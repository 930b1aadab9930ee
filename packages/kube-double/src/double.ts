// startKubeDouble: the apiserver double on a local port (HTTPS with a throwaway CA by default),
// with its scheduler, and a kubeconfig writer for kubectl and @kubernetes/client-node.
import { randomBytes } from 'node:crypto';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { KubeApiServer, ADMIN_USER } from './apiserver.js';
import { systemClock, type Clock } from './clock.js';
import { writeKubeconfig } from './kubeconfig.js';
import { servedOpenApi, type OpenApiDocuments } from './openapi.js';
import { Scheduler } from './scheduler.js';
import type { UserInfo } from './service-account-tokens.js';
import { createServingCertificate } from './tls.js';

export interface KubeDoubleOptions {
  port?: number;
  host?: string;
  /** The bearer token of the `system:masters` admin; random when not given. */
  adminToken?: string;
  /** Extra bearer tokens mapped to users (e.g. a test's unprivileged user). */
  staticTokens?: Record<string, UserInfo>;
  /** HTTPS with a throwaway CA (the default, as a cluster serves), or plain HTTP. */
  tls?: boolean;
  clock?: Clock;
  issuer?: string;
  /** How often an open watch that allows bookmarks receives one (the apiserver: about a minute). */
  bookmarkIntervalMs?: number;
  /** Events kept for watch resumption before a resourceVersion is answered with 410 Gone. */
  historyLimit?: number;
  openapi?: OpenApiDocuments;
  /** One stderr line per request (method, URL, status); also KUBE_DOUBLE_LOG=1. */
  log?: boolean;
}

export interface KubeDouble {
  url: string;
  adminToken: string;
  /** PEM of the CA that signed the serving certificate (undefined over HTTP). */
  caCertificate?: string;
  api: KubeApiServer;
  store: KubeApiServer['store'];
  tokens: KubeApiServer['tokens'];
  scheduler: Scheduler;
  /** Writes a kubeconfig into `dir` (admin unless a token is given) and returns its path. */
  kubeconfig(dir: string, options?: { token?: string; namespace?: string; file?: string }): string;
  close(): Promise<void>;
}

export const DEFAULT_ISSUER = 'https://kubernetes.default.svc.cluster.local';

export async function startKubeDouble(options: KubeDoubleOptions = {}): Promise<KubeDouble> {
  const adminToken = options.adminToken ?? randomBytes(24).toString('base64url');
  const useTls = options.tls ?? true;
  const certificate = useTls ? createServingCertificate() : undefined;
  const issuer = options.issuer ?? DEFAULT_ISSUER;
  const api = new KubeApiServer({
    clock: options.clock ?? systemClock,
    adminToken,
    staticTokens: options.staticTokens,
    issuer,
    apiAudiences: [issuer],
    bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000,
    historyLimit: options.historyLimit,
    caCertificate: certificate?.caCertificate,
    openapi: options.openapi ?? servedOpenApi(),
  });
  const scheduler = new Scheduler(api);
  const log = options.log ?? process.env.KUBE_DOUBLE_LOG === '1';
  const handler = (request: IncomingMessage, response: ServerResponse) => {
    if (log) {
      response.on('finish', () =>
        process.stderr.write(
          `kube-double ${request.method ?? ''} ${request.url ?? ''} ${request.headers['content-type'] ?? ''} -> ${response.statusCode}\n`,
        ),
      );
    }
    void api.handle(request, response);
  };
  const server: Server = certificate
    ? createHttpsServer({ cert: certificate.certificate, key: certificate.key }, handler)
    : createHttpServer(handler);
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `${useTls ? 'https' : 'http'}://${host}:${port}`;
  return {
    url,
    adminToken,
    caCertificate: certificate?.caCertificate,
    api,
    store: api.store,
    tokens: api.tokens,
    scheduler,
    kubeconfig: (dir, kubeconfigOptions = {}) =>
      writeKubeconfig(
        dir,
        {
          server: url,
          token: kubeconfigOptions.token ?? adminToken,
          caCertificate: certificate?.caCertificate,
          namespace: kubeconfigOptions.namespace,
          user: kubeconfigOptions.token === undefined ? ADMIN_USER.username : 'token-user',
        },
        kubeconfigOptions.file,
      ),
    close: async () => {
      scheduler.stop();
      api.watches.closeAll();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
