// One handle on "an apiserver for a test", whichever it is: the double (in process) or the real
// kube-apiserver (startRealKube). Tests that must hold on both talk to it only through what this
// handle offers — kubeconfigs, admin HTTP calls, list, watch, a kubelet simulator — so one test
// body runs against each (describe.each(API_SERVER_KINDS)).
import { request as httpsRequest } from 'node:https';
import { startKubeDouble, type KubeDouble, type KubeDoubleOptions } from './double.js';
import { startKubelet, type Kubelet, type KubeletOptions } from './kubelet.js';
import { writeKubeconfig } from './kubeconfig.js';
import type { KubeObject } from './objects.js';
import {
  realKubeWanted,
  startRealKube,
  type RealKube,
  type RealKubeOptions,
} from './real-apiserver.js';

export type ApiServerKind = 'double' | 'real';

/**
 * What a test parametrized over apiservers runs against: the double and the real kube-apiserver
 * (the real one only when it is built or required: realKubeWanted()).
 */
export const API_SERVER_KINDS: readonly ApiServerKind[] = realKubeWanted()
  ? ['double', 'real']
  : ['double'];

export interface ApiReply<T = Record<string, unknown>> {
  status: number;
  body: T;
}

export interface ApiServerHandle {
  kind: ApiServerKind;
  url: string;
  adminToken: string;
  caCertificate: string;
  /** Only for kind 'double' (reaching into it makes a test double-only). */
  double?: KubeDouble;
  /** Only for kind 'real'. */
  real?: RealKube;
  /** Writes a kubeconfig into `dir` (admin unless a token is given) and returns its path. */
  kubeconfig(dir: string, options?: { token?: string; namespace?: string; file?: string }): string;
  /** A JSON call as the admin (or as `token`). */
  request<T = Record<string, unknown>>(
    method: string,
    path: string,
    body?: unknown,
    options?: { token?: string; contentType?: string },
  ): Promise<ApiReply<T>>;
  /** The items of a collection (`/api/v1/namespaces/x/pods`, `/apis/apps/v1/deployments`). */
  list<T extends KubeObject = KubeObject>(path: string): Promise<T[]>;
  /**
   * Every change to a collection from now on (resumed across the apiserver's watch timeouts).
   * Returns the function that stops it; `ready` resolves once the first watch is open.
   */
  watch(
    path: string,
    onEvent: (type: string, object: KubeObject) => void,
  ): { stop(): void; ready: Promise<void> };
  /** A kubelet simulator registered with this apiserver. */
  startKubelet(options: Omit<KubeletOptions, 'double' | 'real' | 'backend'>): Kubelet;
  close(): Promise<void>;
}

export interface StartApiServerOptions {
  double?: KubeDoubleOptions;
  real?: RealKubeOptions;
}

function call<T>(
  url: string,
  ca: string,
  token: string,
  method: string,
  path: string,
  body: unknown,
  contentType: string,
): Promise<ApiReply<T>> {
  return new Promise((done, fail) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = httpsRequest(
      new URL(path, url),
      {
        method,
        ca,
        headers: {
          accept: 'application/json',
          authorization: `Bearer ${token}`,
          ...(payload !== undefined
            ? { 'content-type': contentType, 'content-length': Buffer.byteLength(payload) }
            : {}),
        },
        timeout: 30_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          let parsed: unknown = {};
          try {
            if (text !== '') parsed = JSON.parse(text);
          } catch {
            parsed = { text };
          }
          done({ status: res.statusCode ?? 0, body: parsed as T });
        });
      },
    );
    req.on('error', fail);
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)));
    req.end(payload);
  });
}

export async function startApiServer(
  kind: ApiServerKind,
  options: StartApiServerOptions = {},
): Promise<ApiServerHandle> {
  let double: KubeDouble | undefined;
  let real: RealKube | undefined;
  if (kind === 'double') double = await startKubeDouble(options.double);
  else real = await startRealKube(options.real);
  const url = (double?.url ?? real?.url)!;
  const adminToken = (double?.adminToken ?? real?.adminToken)!;
  const caCertificate = (double?.caCertificate ?? real?.caCertificate)!;
  const streams = new Set<{ destroy(): void }>();
  const request: ApiServerHandle['request'] = (method, path, body, o = {}) =>
    call(
      url,
      caCertificate,
      o.token ?? adminToken,
      method,
      path,
      body,
      o.contentType ?? 'application/json',
    );
  const list: ApiServerHandle['list'] = async <T extends KubeObject>(path: string) => {
    const reply = await request<{ items?: T[] }>('GET', path);
    if (reply.status !== 200)
      throw new Error(`GET ${path}: ${reply.status} ${JSON.stringify(reply.body)}`);
    return reply.body.items ?? [];
  };
  const watch: ApiServerHandle['watch'] = (path, onEvent) => {
    let stopped = false;
    let current: { destroy(): void } | undefined;
    let opened: () => void = () => undefined;
    const ready = new Promise<void>((done) => (opened = done));
    const once = (rv: string) =>
      new Promise<string | undefined>((done) => {
        let last: string | undefined = rv;
        const separator = path.includes('?') ? '&' : '?';
        const req = httpsRequest(
          new URL(
            `${path}${separator}watch=true&allowWatchBookmarks=true&timeoutSeconds=120&resourceVersion=${rv}`,
            url,
          ),
          {
            ca: caCertificate,
            headers: { accept: 'application/json', authorization: `Bearer ${adminToken}` },
          },
          (res) => {
            opened();
            let buffered = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => {
              buffered += chunk;
              let newline = buffered.indexOf('\n');
              while (newline >= 0) {
                const line = buffered.slice(0, newline).trim();
                buffered = buffered.slice(newline + 1);
                newline = buffered.indexOf('\n');
                if (line === '') continue;
                const event = JSON.parse(line) as { type: string; object: KubeObject };
                if (event.type === 'ERROR') {
                  last = undefined; // expired: list again
                  continue;
                }
                if (last !== undefined) last = event.object.metadata.resourceVersion ?? last;
                if (event.type !== 'BOOKMARK') onEvent(event.type, event.object);
              }
            });
            res.on('end', () => done(last));
            res.on('error', () => done(last));
          },
        );
        req.on('error', () => done(last));
        current = req;
        streams.add(req);
        req.on('close', () => streams.delete(req));
        req.end();
      });
    void (async () => {
      let rv: string | undefined;
      while (!stopped) {
        if (rv === undefined) {
          const reply = await request<{ metadata: { resourceVersion: string } }>('GET', path).catch(
            () => undefined,
          );
          rv = reply?.body.metadata?.resourceVersion;
          if (rv === undefined) {
            await new Promise((done) => setTimeout(done, 200));
            continue;
          }
        }
        rv = await once(rv);
      }
    })();
    return {
      ready,
      stop: () => {
        stopped = true;
        current?.destroy();
      },
    };
  };
  return {
    kind,
    url,
    adminToken,
    caCertificate,
    double,
    real,
    kubeconfig: (dir, o = {}) =>
      double !== undefined
        ? double.kubeconfig(dir, o)
        : o.token === undefined
          ? real!.kubeconfig(dir, { namespace: o.namespace, file: o.file })
          : writeKubeconfig(
              dir,
              {
                server: url,
                token: o.token,
                caCertificate,
                namespace: o.namespace,
                user: 'token-user',
              },
              o.file,
            ),
    request,
    list,
    watch,
    startKubelet: (o) =>
      double !== undefined ? startKubelet({ ...o, double }) : startKubelet({ ...o, real }),
    close: async () => {
      for (const stream of streams) stream.destroy();
      await double?.close();
      await real?.close();
    },
  };
}
