// What the kubelet simulator needs from an apiserver, twice: in-process against the double (its
// store, synchronously, so tests with a ManualClock stay deterministic), and over HTTPS against any
// real kube-apiserver as the node's own identity (a client certificate for system:node:<name>), so
// the Node authorizer and NodeRestriction judge every read, status write and TokenRequest exactly
// as they judge a kubelet's.
import type { IncomingMessage } from 'node:http';
import {
  request as httpsRequest,
  createServer as createHttpsServer,
  type Server,
} from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { ADMIN_USER } from './apiserver.js';
import { systemClock, type Clock } from './clock.js';
import type { KubeDouble } from './double.js';
import type { ConfigMap, KubeObject, Node, Pod, Secret } from './objects.js';
import { createTokenRequest } from './reviews.js';
import { KubeApiError } from './status.js';
import { createServingCertificate } from './tls.js';

export type PodEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** A read the apiserver refused or failed: the kubelet keeps the container waiting and retries. */
export class NodeApiError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export type LogReader = (namespace: string, name: string, container?: string) => string | undefined;

export interface NodeBackend {
  /** The apiserver's URL (what pods get as KUBERNETES_SERVICE_HOST/PORT). */
  readonly url: string;
  readonly clock: Clock;
  /**
   * Serves `kubectl logs` for this node; returns the port the Node object advertises as its
   * kubelet endpoint (undefined when the apiserver reads logs in-process).
   */
  serveLogs(nodeName: string, read: LogReader): Promise<number | undefined>;
  /** Creates the Node (or refreshes its status when it exists). */
  registerNode(node: Node): Promise<void>;
  /** The node's heartbeat (its Lease in kube-node-lease); a no-op on the double. */
  heartbeat(nodeName: string): Promise<void>;
  /**
   * Every pod bound to the node: first those that exist (as ADDED), then each change. Calls back
   * synchronously on the double.
   */
  watchPods(nodeName: string, onPod: (type: PodEventType, pod: Pod) => void): () => void;
  /** undefined = not found; throws NodeApiError when the apiserver refuses or fails. */
  readSecret(namespace: string, name: string): Promise<Secret | undefined>;
  readConfigMap(namespace: string, name: string): Promise<ConfigMap | undefined>;
  /** TokenRequest for the pod's service account, bound to the pod. */
  requestToken(
    namespace: string,
    serviceAccount: string,
    spec: {
      audiences?: string[];
      expirationSeconds: number;
      boundObjectRef: { kind: 'Pod'; apiVersion: 'v1'; name: string; uid: string };
    },
  ): Promise<{ token: string; expirationTimestamp: string }>;
  /** Replaces the pod's status, if the pod is still the one with this uid. */
  writePodStatus(
    namespace: string,
    name: string,
    uid: string,
    status: Pod['status'],
  ): Promise<void>;
  /** Removes the pod for good (its containers are gone), if it is still the one with this uid. */
  removePod(namespace: string, name: string, uid: string): Promise<void>;
  close(): Promise<void>;
}

// ---- the double, in process --------------------------------------------------------------------

export function doubleNodeBackend(double: KubeDouble, clock?: Clock): NodeBackend {
  const { api, store } = double;
  const context = () => api.context(ADMIN_USER);
  const podType = () => api.type('', 'pods');
  let logNode: string | undefined;
  return {
    url: double.url,
    clock: clock ?? api.clock,
    serveLogs(nodeName, read) {
      logNode = nodeName;
      api.logSources.set(nodeName, read);
      return Promise.resolve(undefined);
    },
    registerNode(node) {
      const nodeType = api.type('', 'nodes');
      const existing = store.get(nodeType, undefined, node.metadata.name ?? '');
      if (existing === undefined) store.create(nodeType, node);
      else store.update(nodeType, { ...existing, status: node.status });
      return Promise.resolve();
    },
    heartbeat: () => Promise.resolve(),
    watchPods(nodeName, onPod) {
      const unsubscribe = store.watchFrom(store.currentRevision(), (event) => {
        if (event.resourceType.resource !== 'pods') return;
        const pod = event.object as Pod;
        if (pod.spec.nodeName !== nodeName && event.type !== 'DELETED') return;
        onPod(event.type, pod);
      });
      for (const pod of store.list(podType()) as Pod[])
        if (pod.spec.nodeName === nodeName) onPod('ADDED', pod);
      return unsubscribe;
    },
    readSecret: (namespace, name) =>
      Promise.resolve(store.get<Secret>(api.type('', 'secrets'), namespace, name)),
    readConfigMap: (namespace, name) =>
      Promise.resolve(store.get<ConfigMap>(api.type('', 'configmaps'), namespace, name)),
    requestToken(namespace, serviceAccount, spec) {
      try {
        const request = createTokenRequest(context(), namespace, serviceAccount, {
          metadata: {},
          spec,
        });
        return Promise.resolve(request.status as { token: string; expirationTimestamp: string });
      } catch (error) {
        if (error instanceof KubeApiError)
          return Promise.reject(new NodeApiError(error.code, error.message));
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
    },
    writePodStatus(namespace, name, uid, status) {
      const pod = store.get<Pod>(podType(), namespace, name);
      if (pod === undefined || pod.metadata.uid !== uid) return Promise.resolve();
      pod.status = status;
      pod.metadata.resourceVersion = '';
      store.update(podType(), pod);
      return Promise.resolve();
    },
    removePod(namespace, name, uid) {
      const pod = store.get(podType(), namespace, name);
      if (pod !== undefined && pod.metadata.uid === uid) store.remove(podType(), namespace, name);
      return Promise.resolve();
    },
    close() {
      if (logNode !== undefined) api.logSources.delete(logNode);
      return Promise.resolve();
    },
  };
}

// ---- a real apiserver, over HTTPS ---------------------------------------------------------------

export interface HttpNodeBackendOptions {
  url: string;
  caCertificate: string;
  /** The node's client certificate (CN system:node:<name>, O system:nodes). */
  clientCertificate: { certificate: string; key: string };
  clock?: Clock;
}

interface Answer {
  status: number;
  body: string;
}

const NODE_LEASE_SECONDS = 40;

/** KUBELET_SIMULATOR_LOG=1: one stderr line per failed apiserver call of the simulator. */
export function debug(message: string): void {
  if (process.env['KUBELET_SIMULATOR_LOG'] === '1')
    process.stderr.write(`kubelet-simulator: ${message}\n`);
}

export function httpNodeBackend(options: HttpNodeBackendOptions): NodeBackend {
  const base = new URL(options.url);
  const tls = {
    ca: options.caCertificate,
    cert: options.clientCertificate.certificate,
    key: options.clientCertificate.key,
  };
  const clock = options.clock ?? systemClock;
  const open = new Set<{ destroy(): void }>();
  let logServer: Server | undefined;
  const logSockets = new Set<Socket>();
  let closed = false;

  const call = (method: string, path: string, body?: unknown, contentType?: string) =>
    new Promise<Answer>((done, fail) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = httpsRequest(
        new URL(path, base),
        {
          ...tls,
          method,
          headers: {
            accept: 'application/json',
            'user-agent': 'leoflow-kubelet-simulator',
            ...(payload !== undefined
              ? {
                  'content-type': contentType ?? 'application/json',
                  'content-length': Buffer.byteLength(payload),
                }
              : {}),
          },
          timeout: 30_000,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => done({ status: res.statusCode ?? 0, body: text }));
          res.on('error', fail);
        },
      );
      req.on('error', fail);
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)));
      req.end(payload);
    });

  const failure = (what: string, answer: Answer) => {
    let message = answer.body;
    try {
      message = (JSON.parse(answer.body) as { message?: string }).message ?? answer.body;
    } catch {
      // not a Status
    }
    return new NodeApiError(answer.status, `${what}: ${message}`);
  };

  const read = async <T>(path: string, what: string): Promise<T | undefined> => {
    const answer = await call('GET', path);
    if (answer.status === 404) return undefined;
    if (answer.status !== 200) throw failure(what, answer);
    return JSON.parse(answer.body) as T;
  };

  const esc = encodeURIComponent;

  return {
    url: options.url,
    clock,
    async serveLogs(_nodeName, readLog) {
      const certificate = createServingCertificate();
      const server = createHttpsServer(
        { cert: certificate.certificate, key: certificate.key },
        (req, res) => {
          // /containerLogs/<namespace>/<pod>/<container>
          const [, kind, namespace, name, container] = (req.url ?? '').split('?')[0]!.split('/');
          const text =
            kind === 'containerLogs'
              ? readLog(
                  decodeURIComponent(namespace ?? ''),
                  decodeURIComponent(name ?? ''),
                  container === undefined ? undefined : decodeURIComponent(container),
                )
              : undefined;
          if (text === undefined) {
            res.writeHead(404, { 'content-type': 'text/plain' });
            res.end('not found');
            return;
          }
          const tail = new URL(req.url ?? '/', 'https://node').searchParams.get('tailLines');
          let out = text;
          if (tail !== null) {
            const lines = text.split('\n');
            if (lines.at(-1) === '') lines.pop();
            out = lines
              .slice(-Number(tail))
              .map((l) => `${l}\n`)
              .join('');
          }
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end(out);
        },
      );
      server.on('connection', (socket: Socket) => {
        logSockets.add(socket);
        socket.on('close', () => logSockets.delete(socket));
      });
      await new Promise<void>((done) => server.listen(0, '127.0.0.1', () => done()));
      logServer = server;
      return (server.address() as AddressInfo).port;
    },
    async registerNode(node) {
      const name = node.metadata.name ?? '';
      const created = await call('POST', '/api/v1/nodes', node);
      if (created.status !== 201 && created.status !== 409)
        throw failure(`registering node ${name}`, created);
      const patched = await call(
        'PATCH',
        `/api/v1/nodes/${esc(name)}/status`,
        { status: node.status },
        'application/merge-patch+json',
      );
      if (patched.status !== 200) throw failure(`node ${name} status`, patched);
    },
    async heartbeat(nodeName) {
      const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${esc(nodeName)}`;
      const renewTime = new Date(clock.now()).toISOString().replace('Z', '000Z');
      const renewed = await call(
        'PATCH',
        path,
        { spec: { renewTime, holderIdentity: nodeName } },
        'application/merge-patch+json',
      );
      if (renewed.status === 200) return;
      if (renewed.status !== 404) throw failure(`node lease ${nodeName}`, renewed);
      const node = await read<Node>(`/api/v1/nodes/${esc(nodeName)}`, `node ${nodeName}`);
      const created = await call(
        'POST',
        '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases',
        {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: {
            name: nodeName,
            ...(node?.metadata.uid !== undefined
              ? {
                  ownerReferences: [
                    { apiVersion: 'v1', kind: 'Node', name: nodeName, uid: node.metadata.uid },
                  ],
                }
              : {}),
          },
          spec: { holderIdentity: nodeName, leaseDurationSeconds: NODE_LEASE_SECONDS, renewTime },
        },
      );
      if (created.status !== 201 && created.status !== 409)
        throw failure(`node lease ${nodeName}`, created);
    },
    watchPods(nodeName, onPod) {
      const selector = `fieldSelector=${esc(`spec.nodeName=${nodeName}`)}`;
      const known = new Map<string, Pod>();
      const key = (pod: KubeObject) => `${pod.metadata.namespace ?? ''}/${pod.metadata.name ?? ''}`;
      let stopped = false;
      let current: { destroy(): void } | undefined;

      const list = async (): Promise<string> => {
        const answer = await call('GET', `/api/v1/pods?${selector}`);
        if (answer.status !== 200) throw failure('listing pods', answer);
        const body = JSON.parse(answer.body) as {
          metadata: { resourceVersion: string };
          items: Pod[];
        };
        const seen = new Set<string>();
        for (const pod of body.items) {
          seen.add(key(pod));
          const was = known.get(key(pod));
          known.set(key(pod), pod);
          if (was?.metadata.uid !== undefined && was.metadata.uid !== pod.metadata.uid)
            onPod('DELETED', was);
          onPod(was?.metadata.uid === pod.metadata.uid ? 'MODIFIED' : 'ADDED', pod);
        }
        for (const [k, pod] of known) {
          if (!seen.has(k)) {
            known.delete(k);
            onPod('DELETED', pod);
          }
        }
        return body.metadata.resourceVersion;
      };

      /** One watch from `rv`: resolves with the last resourceVersion seen, or 'expired'. */
      const watch = (rv: string) =>
        new Promise<string>((done) => {
          let last = rv;
          const req = httpsRequest(
            new URL(
              `/api/v1/pods?${selector}&watch=true&allowWatchBookmarks=true&timeoutSeconds=240&resourceVersion=${esc(rv)}`,
              base,
            ),
            { ...tls, headers: { accept: 'application/json' } },
            (res: IncomingMessage) => {
              if (res.statusCode !== 200) {
                res.resume();
                done(res.statusCode === 410 ? 'expired' : last);
                return;
              }
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
                  const event = JSON.parse(line) as { type: string; object: Pod };
                  if (event.type === 'ERROR') {
                    const code = (event.object as unknown as { code?: number }).code;
                    last = code === 410 ? 'expired' : last;
                    req.destroy();
                    continue;
                  }
                  last = event.object.metadata.resourceVersion ?? last;
                  if (event.type === 'BOOKMARK') continue;
                  const type = event.type as PodEventType;
                  const pod = event.object;
                  if (type === 'DELETED') known.delete(key(pod));
                  else known.set(key(pod), pod);
                  onPod(type, pod);
                }
              });
              res.on('end', () => done(last));
              res.on('error', () => done(last));
            },
          );
          req.on('error', () => done(last));
          current = req;
          open.add(req);
          req.on('close', () => open.delete(req));
          req.end();
        });

      void (async () => {
        let rv: string | undefined;
        while (!stopped && !closed) {
          try {
            if (rv === undefined || rv === 'expired') rv = await list();
            rv = await watch(rv);
          } catch (error) {
            debug(`pod watch of ${nodeName}: ${(error as Error).message}`);
            rv = undefined;
            await new Promise((done) => setTimeout(done, 500));
          }
        }
      })();
      return () => {
        stopped = true;
        current?.destroy();
      };
    },
    readSecret: (namespace, name) =>
      read<Secret>(`/api/v1/namespaces/${esc(namespace)}/secrets/${esc(name)}`, `secret "${name}"`),
    readConfigMap: (namespace, name) =>
      read<ConfigMap>(
        `/api/v1/namespaces/${esc(namespace)}/configmaps/${esc(name)}`,
        `configmap "${name}"`,
      ),
    async requestToken(namespace, serviceAccount, spec) {
      const answer = await call(
        'POST',
        `/api/v1/namespaces/${esc(namespace)}/serviceaccounts/${esc(serviceAccount)}/token`,
        { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec },
      );
      if (answer.status !== 201 && answer.status !== 200)
        throw failure(`token for ${namespace}/${serviceAccount}`, answer);
      return (JSON.parse(answer.body) as { status: { token: string; expirationTimestamp: string } })
        .status;
    },
    async writePodStatus(namespace, name, uid, status) {
      // The uid in the patch is a precondition: a re-created pod of the same name is left alone.
      const answer = await call(
        'PATCH',
        `/api/v1/namespaces/${esc(namespace)}/pods/${esc(name)}/status`,
        { metadata: { uid }, status },
        'application/merge-patch+json',
      );
      if (answer.status === 404 || answer.status === 409) return;
      if (answer.status !== 200) throw failure(`status of pod ${namespace}/${name}`, answer);
    },
    async removePod(namespace, name, uid) {
      const answer = await call(
        'DELETE',
        `/api/v1/namespaces/${esc(namespace)}/pods/${esc(name)}`,
        {
          apiVersion: 'v1',
          kind: 'DeleteOptions',
          gracePeriodSeconds: 0,
          preconditions: { uid },
        },
      );
      if (answer.status === 404 || answer.status === 409) return;
      if (answer.status !== 200 && answer.status !== 202)
        throw failure(`deleting pod ${namespace}/${name}`, answer);
    },
    async close() {
      closed = true;
      for (const req of open) req.destroy();
      if (logServer !== undefined) {
        const done = new Promise<void>((resolve) => logServer?.close(() => resolve()));
        for (const socket of logSockets) socket.destroy();
        await done;
      }
    },
  };
}
