// The cluster a fidelity test talks to, by kind:
// - `double`: the kube-apiserver double with the kubelet simulator (in process);
// - `real-apiserver`: Kubernetes' own kube-apiserver, etcd, kube-controller-manager and
//   kube-scheduler (tools/kube-apiserver, `npm run kube:build`) with the same kubelet simulator
//   registered as a node over HTTPS;
// - `KUBECONFIG`: whatever cluster KUBECONFIG points to (then it is the only kind, and the cases
//   that need the issuer's key or etcd skip themselves: see the package README).
// Fidelity files run their cases once per kind in CLUSTER_KINDS, with the same assertions.
import { execFile } from 'node:child_process';
import { createPrivateKey, sign } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  realKubeWanted,
  startKubeDouble,
  startKubelet,
  startRealKube,
  type KubeDouble,
  type Kubelet,
  type KubeDoubleOptions,
  type RealKube,
} from '../../src/index.js';

const run = promisify(execFile);

export const REAL_CLUSTER = process.env.KUBECONFIG !== undefined && process.env.KUBECONFIG !== '';

export type ClusterKind = 'double' | 'real-apiserver' | 'KUBECONFIG';

/** The kinds every fidelity case runs against: the double and the real apiserver, in CI. */
export const CLUSTER_KINDS: readonly ClusterKind[] = REAL_CLUSTER
  ? ['KUBECONFIG']
  : realKubeWanted()
    ? ['double', 'real-apiserver']
    : ['double'];

export const KUBECTL = process.env.KUBE_DOUBLE_KUBECTL ?? '/usr/bin/kubectl';

/** busybox as these tests use it: no ENTRYPOINT, CMD sh — the host's /bin/sh and tools. */
export const BUSYBOX = 'busybox:1.36';

export interface Reply<T = Record<string, unknown>> {
  status: number;
  body: T;
}

export interface Cluster {
  kind: ClusterKind;
  kubeconfig: string;
  /** Present only against the double. */
  double?: KubeDouble;
  /** Present only against the real apiserver. */
  real?: RealKube;
  kubelet?: Kubelet;
  dir: string;
  /** The server's minor version (the double says 1.32, the real apiserver 1.34). */
  minor?: string;
  kubectl(
    args: string[],
    options?: { input?: string; kubeconfig?: string },
  ): Promise<KubectlResult>;
  /** A JSON call as the admin (or as `token`), over HTTPS with the cluster's CA. */
  call<T = Record<string, unknown>>(
    method: string,
    path: string,
    body?: unknown,
    options?: { token?: string; contentType?: string },
  ): Promise<Reply<T>>;
  /**
   * Forgets the stored history up to now (etcd compaction on the real apiserver), so a watch from
   * an older resourceVersion of a resource served without a watch cache (events) is 410 Gone.
   */
  compact?(): Promise<void>;
  /** Signs claims as the service-account issuer (both kinds hold the issuer's key in tests). */
  signAsIssuer?(header: Record<string, unknown>, claims: Record<string, unknown>): string;
  close(): Promise<void>;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

function httpsJson<T>(
  url: string,
  ca: string | undefined,
  token: string,
  method: string,
  path: string,
  body: unknown,
  contentType: string,
): Promise<Reply<T>> {
  return new Promise((done, fail) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = httpsRequest(
      new URL(path, url),
      {
        method,
        ...(ca !== undefined ? { ca } : {}),
        headers: {
          accept: 'application/json',
          authorization: `Bearer ${token}`,
          ...(payload !== undefined
            ? { 'content-type': contentType, 'content-length': Buffer.byteLength(payload) }
            : {}),
        },
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
    req.end(payload);
  });
}

function issuerSigner(pem: string) {
  const key = createPrivateKey(pem);
  return (header: Record<string, unknown>, claims: Record<string, unknown>) => {
    const h = Buffer.from(JSON.stringify(header)).toString('base64url');
    const c = Buffer.from(JSON.stringify(claims)).toString('base64url');
    return `${h}.${c}.${sign('sha256', Buffer.from(`${h}.${c}`), key).toString('base64url')}`;
  };
}

export async function startCluster(
  options: KubeDoubleOptions & { kubelet?: boolean; kind?: ClusterKind } = {},
): Promise<Cluster> {
  const kind = options.kind ?? (REAL_CLUSTER ? 'KUBECONFIG' : 'double');
  const dir = mkdtempSync(join(tmpdir(), 'kube-fidelity-test-'));
  // kubectl here is a dispatcher that caches the server's version: each cluster keeps its own cache.
  const cacheDir = join(dir, 'kubectl-cache');
  let double: KubeDouble | undefined;
  let real: RealKube | undefined;
  let kubelet: Kubelet | undefined;
  let kubeconfig: string;
  let minor: string | undefined;
  let call: Cluster['call'] = () =>
    Promise.reject(new Error('no admin HTTP access to a KUBECONFIG cluster in these tests'));
  let compact: Cluster['compact'];
  let signAsIssuer: Cluster['signAsIssuer'];
  const images = { [BUSYBOX]: { cmd: ['sh'] } };
  if (kind === 'KUBECONFIG') {
    kubeconfig = process.env.KUBECONFIG ?? '';
  } else if (kind === 'double') {
    double = await startKubeDouble(options);
    const started = double;
    kubeconfig = double.kubeconfig(dir);
    minor = '32';
    call = (method, path, body, o = {}) =>
      httpsJson(
        started.url,
        started.caCertificate,
        o.token ?? started.adminToken,
        method,
        path,
        body,
        o.contentType ?? 'application/json',
      );
    compact = () => {
      started.store.compact();
      return Promise.resolve();
    };
    signAsIssuer = issuerSigner(started.tokens.signingKeyPem());
    if (options.kubelet !== false) {
      kubelet = startKubelet({
        double,
        nodeName: 'node-1',
        workRoot: join(dir, 'pods'),
        imageMap: images,
      });
    }
  } else {
    real = await startRealKube({ prefix: 'kube-fidelity-real-' });
    const started = real;
    kubeconfig = real.kubeconfig(dir);
    minor = '34';
    call = (method, path, body, o = {}) =>
      httpsJson(
        started.url,
        started.caCertificate,
        o.token ?? started.adminToken,
        method,
        path,
        body,
        o.contentType ?? 'application/json',
      );
    compact = async () => {
      await started.compactEtcd();
    };
    signAsIssuer = issuerSigner(readFileSync(join(started.dir, 'sa.key'), 'utf8'));
    if (options.kubelet !== false) {
      kubelet = startKubelet({
        real,
        nodeName: 'node-1',
        workRoot: join(dir, 'pods'),
        imageMap: images,
      });
      await kubelet.ready;
    }
  }
  const kubectl = async (args: string[], opts: { input?: string; kubeconfig?: string } = {}) => {
    const child = run(KUBECTL, ['--cache-dir', cacheDir, ...args], {
      env: { ...process.env, KUBECONFIG: opts.kubeconfig ?? kubeconfig },
      timeout: 60_000,
    });
    if (opts.input !== undefined) {
      child.child.stdin?.end(opts.input);
    }
    try {
      const { stdout, stderr } = await child;
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failure = error as { code?: number; stdout?: string; stderr?: string };
      return {
        code: typeof failure.code === 'number' ? failure.code : 1,
        stdout: failure.stdout ?? '',
        stderr: failure.stderr ?? '',
      };
    }
  };
  return {
    kind,
    kubeconfig,
    double,
    real,
    kubelet,
    dir,
    minor,
    kubectl,
    call,
    compact,
    signAsIssuer,
    close: async () => {
      await kubelet?.stop();
      await double?.close();
      await real?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A namespace name unique to this run, so a real cluster can host several runs. */
export function uniqueNamespace(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Polls until `check` returns a value (not undefined), or fails after `ms` naming `what`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined>,
  ms = 20_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((done) => setTimeout(done, 100));
  }
}
