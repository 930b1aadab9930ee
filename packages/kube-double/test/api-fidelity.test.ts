// The API answers the credential plane depends on, asserted identically against the double and the
// real kube-apiserver: TokenReview (through `kubectl create -f` and over HTTP, the empty token, a
// pod-bound token's user and extras, another audience, an expired token, a deleted and a re-created
// pod), projected service-account token volumes (defaults and limits), RBAC refusals, and watch
// (bookmarks before the timeout, 410 once the history is compacted). Expected values are what the
// real apiserver answers; a difference the double keeps is listed in the package README.
import { request as httpsRequest } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLUSTER_KINDS,
  eventually,
  startCluster,
  uniqueNamespace,
  type Cluster,
} from './support/cluster.js';

const AUDIENCE = 'leoflow-control-plane';

interface Review {
  status: {
    authenticated?: boolean;
    error?: string;
    audiences?: string[];
    user: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  };
}

interface WatchEvent {
  type: string;
  object: {
    kind?: string;
    apiVersion?: string;
    code?: number;
    reason?: string;
    message?: string;
    metadata?: { name?: string; resourceVersion?: string };
  };
}

const kinds = CLUSTER_KINDS.filter((kind) => kind !== 'KUBECONFIG');

describe.skipIf(kinds.length === 0).each(kinds)('the API of the %s', (kind) => {
  let cluster: Cluster;
  const ns = uniqueNamespace('api-fidelity');
  let serial = 0;

  const review = (token: string, audiences?: string[]) =>
    cluster.call<Review>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token, ...(audiences ? { audiences } : {}) },
    });

  async function createPod(name: string, extra: Record<string, unknown> = {}) {
    const reply = await cluster.call<{ metadata: { uid: string } }>(
      'POST',
      `/api/v1/namespaces/${ns}/pods`,
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name },
        spec: {
          serviceAccountName: 'agent',
          automountServiceAccountToken: false,
          // no node carries this label: the pod stays Pending, unscheduled
          nodeSelector: { 'fidelity.leoflow.io/nowhere': 'true' },
          containers: [{ name: 'main', image: 'agent' }],
          ...extra,
        },
      },
    );
    return reply;
  }

  async function boundToken(pod: string, uid: string, audiences = [AUDIENCE]) {
    const reply = await cluster.call<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${ns}/serviceaccounts/agent/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          audiences,
          expirationSeconds: 600,
          boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: pod, uid },
        },
      },
    );
    expect(reply.status).toBe(201);
    return reply.body.status.token;
  }

  /** Collects watch events until `until` holds, the stream ends, or `ms` pass. */
  function watch(
    path: string,
    until: (events: WatchEvent[]) => boolean,
    ms = 10_000,
  ): Promise<{ events: WatchEvent[]; status: number; elapsedMs: number }> {
    const started = Date.now();
    const url = new URL(
      path,
      cluster.double?.url ?? cluster.real?.url ?? 'https://unreachable.invalid',
    );
    return new Promise((done, fail) => {
      const events: WatchEvent[] = [];
      let status = 0;
      const finish = () => {
        clearTimeout(timer);
        req.destroy();
        done({ events, status, elapsedMs: Date.now() - started });
      };
      const req = httpsRequest(
        url,
        {
          ca: cluster.double?.caCertificate ?? cluster.real?.caCertificate,
          headers: {
            accept: 'application/json',
            authorization: `Bearer ${cluster.double?.adminToken ?? cluster.real?.adminToken ?? ''}`,
          },
        },
        (res) => {
          status = res.statusCode ?? 0;
          let buffered = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            buffered += chunk;
            let newline = buffered.indexOf('\n');
            while (newline >= 0) {
              const line = buffered.slice(0, newline).trim();
              buffered = buffered.slice(newline + 1);
              newline = buffered.indexOf('\n');
              if (line !== '') events.push(JSON.parse(line) as WatchEvent);
            }
            if (until(events)) finish();
          });
          res.on('end', finish);
        },
      );
      const timer = setTimeout(finish, ms);
      req.on('error', (error) => (events.length > 0 ? finish() : fail(error)));
      req.end();
    });
  }

  beforeAll(async () => {
    cluster = await startCluster({ kind });
    expect((await cluster.kubectl(['create', 'namespace', ns])).code).toBe(0);
    expect((await cluster.kubectl(['-n', ns, 'create', 'serviceaccount', 'agent'])).code).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await cluster?.close();
  });

  describe('TokenReview', () => {
    it('is created with `kubectl create -f` and answers the reviewed identity', async () => {
      const token = (
        await cluster.kubectl(['-n', ns, 'create', 'token', 'agent', '--audience', AUDIENCE])
      ).stdout.trim();
      const created = await cluster.kubectl(['create', '-f', '-', '-o', 'json'], {
        input: JSON.stringify({
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, audiences: [AUDIENCE] },
        }),
      });
      expect(created.stderr).toBe('');
      const answer = JSON.parse(created.stdout) as Review;
      expect(answer.status).toMatchObject({
        authenticated: true,
        audiences: [AUDIENCE],
        user: { username: `system:serviceaccount:${ns}:agent` },
      });
    });

    it('refuses an empty token: "token is required"', async () => {
      const created = await cluster.kubectl(['create', '-f', '-'], {
        input: JSON.stringify({
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token: '' },
        }),
      });
      expect(created.code).not.toBe(0);
      expect(created.stderr.trim()).toBe(
        'Error from server (BadRequest): error when creating "STDIN": token is required for TokenReview in authentication',
      );
      const reply = await review('');
      expect(reply.status).toBe(400);
      expect(reply.body).toMatchObject({
        kind: 'Status',
        code: 400,
        reason: 'BadRequest',
        message: 'token is required for TokenReview in authentication',
      });
    });

    it("authenticates a pod-bound token: the account, its groups, the pod's extras, the audiences", async () => {
      const pod = await createPod('bound');
      const token = await boundToken('bound', pod.body.metadata.uid);
      const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as {
        jti: string;
        'kubernetes.io': { serviceaccount: { uid: string } };
      };
      const reply = await review(token, [AUDIENCE]);
      expect(reply.status).toBe(201);
      expect(reply.body.status).toEqual({
        authenticated: true,
        user: {
          username: `system:serviceaccount:${ns}:agent`,
          uid: claims['kubernetes.io'].serviceaccount.uid,
          groups: [
            'system:serviceaccounts',
            `system:serviceaccounts:${ns}`,
            'system:authenticated',
          ],
          extra: {
            'authentication.kubernetes.io/credential-id': [`JTI=${claims.jti}`],
            'authentication.kubernetes.io/pod-name': ['bound'],
            'authentication.kubernetes.io/pod-uid': [pod.body.metadata.uid],
          },
        },
        audiences: [AUDIENCE],
      });
    });

    it("refuses a token of another audience with the authenticator's error", async () => {
      const pod = await createPod('other-audience');
      const token = await boundToken('other-audience', pod.body.metadata.uid);
      const reply = await review(token, ['another-audience']);
      expect(reply.body.status).toEqual({
        user: {},
        error: `[invalid bearer token, token audiences ["${AUDIENCE}"] is invalid for the target audiences ["another-audience"]]`,
      });
      // no audiences in the review: the apiserver's own
      const own = await review(token);
      expect(own.body.status.error).toBe(
        `[invalid bearer token, token audiences ["${AUDIENCE}"] is invalid for the target audiences ["https://kubernetes.default.svc.cluster.local"]]`,
      );
    });

    it('refuses a token the issuer signed that expired an hour ago', async () => {
      const pod = await createPod('expired');
      const token = await boundToken('expired', pod.body.metadata.uid);
      const [header, payload] = token.split('.') as [string, string];
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<
        string,
        number
      >;
      const hourAgo = Math.floor(Date.now() / 1000) - 3600;
      const expired = cluster.signAsIssuer!(
        JSON.parse(Buffer.from(header, 'base64url').toString()) as Record<string, unknown>,
        { ...claims, iat: hourAgo - 600, nbf: hourAgo - 600, exp: hourAgo },
      );
      const reply = await review(expired, [AUDIENCE]);
      expect(reply.body.status).toEqual({
        user: {},
        error: '[invalid bearer token, service account token has expired]',
      });
      // the same claims, not expired, re-signed: accepted (the refusal above is the expiry)
      const fresh = cluster.signAsIssuer!(
        JSON.parse(Buffer.from(header, 'base64url').toString()) as Record<string, unknown>,
        claims,
      );
      expect((await review(fresh, [AUDIENCE])).body.status.authenticated).toBe(true);
    });

    it("stops vouching for a deleted pod's token, and for it again once a pod of the same name is created (bounded: a real apiserver caches an authentication for up to ~10 s)", async () => {
      const pod = await createPod('gone');
      const token = await boundToken('gone', pod.body.metadata.uid);
      expect((await review(token, [AUDIENCE])).body.status.authenticated).toBe(true);
      const deleted = await cluster.call('DELETE', `/api/v1/namespaces/${ns}/pods/gone`, {
        gracePeriodSeconds: 0,
      });
      expect(deleted.status).toBe(200);
      const refused = await eventually(
        "the deleted pod's token to be refused",
        async () => {
          const r = await review(token, [AUDIENCE]);
          return r.body.status.authenticated ? undefined : r.body.status;
        },
        20_000,
      );
      expect(refused).toEqual({
        user: {},
        error: '[invalid bearer token, service account token has been invalidated]',
      });
      // a pod under the same name, with a new uid: the old token names the old uid
      const again = await createPod('gone');
      expect(again.status).toBe(201);
      const stale = await eventually(
        "the re-created pod's old token to be refused for its uid",
        async () => {
          const r = await review(token, [AUDIENCE]);
          return r.body.status.error?.includes('pod UID') ? r.body.status : undefined;
        },
        20_000,
      );
      expect(stale).toEqual({
        user: {},
        error: `[invalid bearer token, pod UID (${again.body.metadata.uid}) does not match service account pod ref claim (${pod.body.metadata.uid})]`,
      });
    }, 60_000);
  });

  describe('projected service-account token volumes', () => {
    const podWith = (token: Record<string, unknown>) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `projected-${(serial += 1)}` },
      spec: {
        automountServiceAccountToken: false,
        serviceAccountName: 'agent',
        nodeSelector: { 'fidelity.leoflow.io/nowhere': 'true' },
        containers: [
          {
            name: 'main',
            image: 'agent',
            volumeMounts: [{ name: 'token', mountPath: '/var/run/leoflow', readOnly: true }],
          },
        ],
        volumes: [{ name: 'token', projected: { sources: [{ serviceAccountToken: token }] } }],
      },
    });
    const create = (token: Record<string, unknown>) =>
      cluster.call<{
        message?: string;
        spec: { volumes: { projected: unknown }[] };
      }>('POST', `/api/v1/namespaces/${ns}/pods`, podWith(token));

    it('defaults expirationSeconds to 3600 and the mode to 0644', async () => {
      const reply = await create({ audience: AUDIENCE, path: 'token' });
      expect(reply.status).toBe(201);
      expect(reply.body.spec.volumes[0]?.projected).toEqual({
        defaultMode: 420,
        sources: [
          { serviceAccountToken: { audience: AUDIENCE, expirationSeconds: 3600, path: 'token' } },
        ],
      });
    });

    it('accepts 600 s and 2^32 s; refuses under 600 s and over 2^32 s, naming the field', async () => {
      expect((await create({ path: 'token', expirationSeconds: 600 })).status).toBe(201);
      expect((await create({ path: 'token', expirationSeconds: 2 ** 32 })).status).toBe(201);
      const short = await create({ path: 'token', expirationSeconds: 599 });
      expect(short.status).toBe(422);
      expect(short.body.message).toMatch(
        /spec\.volumes\[0\]\.projected\.sources\[0\]\.serviceAccountToken\.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes/,
      );
      const long = await create({ path: 'token', expirationSeconds: 2 ** 32 + 1 });
      expect(long.status).toBe(422);
      expect(long.body.message).toMatch(
        /spec\.volumes\[0\]\.projected\.sources\[0\]\.serviceAccountToken\.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2\^32 seconds/,
      );
    });

    it('requires a path', async () => {
      const reply = await create({ audience: AUDIENCE });
      expect(reply.status).toBe(422);
      expect(reply.body.message).toMatch(/spec\.volumes\[0\]\.projected\.path: Required value/);
    });
  });

  describe('RBAC', () => {
    it('answers a token without a grant with the authorizer 403, namespaced and cluster-scoped', async () => {
      const token = (await cluster.kubectl(['-n', ns, 'create', 'token', 'agent'])).stdout.trim();
      const pods = await cluster.call('GET', `/api/v1/namespaces/${ns}/pods`, undefined, { token });
      expect(pods.status).toBe(403);
      expect(pods.body).toMatchObject({
        kind: 'Status',
        reason: 'Forbidden',
        code: 403,
        message: `pods is forbidden: User "system:serviceaccount:${ns}:agent" cannot list resource "pods" in API group "" in the namespace "${ns}"`,
      });
      const named = await cluster.call('GET', `/api/v1/namespaces/${ns}/secrets/x`, undefined, {
        token,
      });
      expect(named.body.message).toBe(
        `secrets "x" is forbidden: User "system:serviceaccount:${ns}:agent" cannot get resource "secrets" in API group "" in the namespace "${ns}"`,
      );
      const nodes = await cluster.call('GET', '/api/v1/nodes', undefined, { token });
      expect(nodes.body.message).toBe(
        `nodes is forbidden: User "system:serviceaccount:${ns}:agent" cannot list resource "nodes" in API group "" at the cluster scope`,
      );
      const reviews = await cluster.call(
        'POST',
        '/apis/authentication.k8s.io/v1/tokenreviews',
        { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 'x' } },
        { token },
      );
      expect(reviews.body.message).toBe(
        `tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:${ns}:agent" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope`,
      );
    });
  });

  describe('watch', () => {
    it('sends a bookmark before the watch times out once the resource moved on unseen (a change in another namespace)', async () => {
      const list = await cluster.call<{ metadata: { resourceVersion: string } }>(
        'GET',
        `/api/v1/namespaces/${ns}/configmaps`,
      );
      let elsewhere = '';
      const opened = watch(
        `/api/v1/namespaces/${ns}/configmaps?watch=true&allowWatchBookmarks=true&timeoutSeconds=5&resourceVersion=${list.body.metadata.resourceVersion}`,
        (seen) => seen.some((e) => e.type === 'BOOKMARK'),
      );
      await new Promise((done) => setTimeout(done, 300));
      const created = await cluster.call<{ metadata: { resourceVersion: string } }>(
        'POST',
        '/api/v1/namespaces/default/configmaps',
        { metadata: { generateName: 'elsewhere-' }, data: { v: '1' } },
      );
      elsewhere = created.body.metadata.resourceVersion;
      const { events, elapsedMs } = await opened;
      expect(events.map((e) => e.type)).toEqual(['BOOKMARK']);
      expect(events[0]?.object).toMatchObject({ kind: 'ConfigMap', apiVersion: 'v1' });
      expect(Number(events[0]?.object.metadata?.resourceVersion)).toBeGreaterThanOrEqual(
        Number(elsewhere),
      );
      // about 2 s before the 5 s timeout
      expect(elapsedMs).toBeGreaterThan(2_000);
      expect(elapsedMs).toBeLessThan(5_000);
    });

    it('sends no bookmark when nothing moved, even to a watch that allows them', async () => {
      const list = await cluster.call<{ metadata: { resourceVersion: string } }>(
        'GET',
        `/api/v1/namespaces/${ns}/configmaps`,
      );
      const { events } = await watch(
        `/api/v1/namespaces/${ns}/configmaps?watch=true&allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion=${list.body.metadata.resourceVersion}`,
        () => false,
      );
      expect(events.map((e) => e.type)).toEqual([]);
    });

    it('sends no bookmark to a watch that did not ask for them', async () => {
      const list = await cluster.call<{ metadata: { resourceVersion: string } }>(
        'GET',
        `/api/v1/namespaces/${ns}/configmaps`,
      );
      const opened = watch(
        `/api/v1/namespaces/${ns}/configmaps?watch=true&timeoutSeconds=3&resourceVersion=${list.body.metadata.resourceVersion}`,
        () => false,
      );
      await new Promise((done) => setTimeout(done, 300));
      await cluster.call('POST', '/api/v1/namespaces/default/configmaps', {
        metadata: { generateName: 'unseen-' },
      });
      const { events } = await opened;
      expect(events.map((e) => e.type)).toEqual([]);
    });

    it('answers a compacted resourceVersion of events (no watch cache) with an ERROR event: 410 Expired', async () => {
      const event = (name: string) => ({
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name },
        involvedObject: { kind: 'Pod', namespace: ns, name: 'bound' },
        reason: 'Testing',
        message: 'fidelity',
        type: 'Normal',
      });
      const first = await cluster.call<{ metadata: { resourceVersion: string } }>(
        'POST',
        `/api/v1/namespaces/${ns}/events`,
        event('first'),
      );
      expect(first.status).toBe(201);
      const old = first.body.metadata.resourceVersion;
      for (const name of ['second', 'third'])
        await cluster.call('POST', `/api/v1/namespaces/${ns}/events`, event(name));
      await cluster.compact!();
      const { events, status } = await watch(
        `/api/v1/namespaces/${ns}/events?watch=true&timeoutSeconds=5&resourceVersion=${old}`,
        (seen) => seen.length > 0,
      );
      expect(status).toBe(200);
      expect(events[0]).toEqual({
        type: 'ERROR',
        object: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: 'The resourceVersion for the provided watch is too old.',
          reason: 'Expired',
          code: 410,
        },
      });
    });
  });
});
