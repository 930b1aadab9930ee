// TokenRequest and TokenReview, two-sided: every live bound token is authenticated with the
// identity the service-account authenticator reports, and every dead one (expired, wrong audience,
// pod gone or replaced, account replaced, forged) is not. Double-only: it moves the clock.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  CLOCK_LEEWAY_SECONDS,
  ManualClock,
  startKubeDouble,
  type KubeDouble,
} from '../src/index.js';
import { REAL_CLUSTER } from './support/cluster.js';
import { call } from './support/http.js';

const AUDIENCE = 'leoflow-control-plane';
let double: KubeDouble;
let other: KubeDouble;
const clock = new ManualClock();
let namespace = '';
let serial = 0;

interface TokenRequestReply {
  status: { token: string; expirationTimestamp: string };
  spec: { audiences: string[]; expirationSeconds: number; boundObjectRef: unknown };
}
interface ReviewReply {
  status: {
    authenticated?: boolean;
    error?: string;
    audiences?: string[];
    user: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  };
}

const admin = <T>(method: string, path: string, body?: unknown) =>
  call<T>(double.url, double.adminToken, method, path, body);

async function createPod(name: string, serviceAccountName = 'default') {
  const reply = await admin<{ metadata: { uid: string } }>(
    'POST',
    `/api/v1/namespaces/${namespace}/pods`,
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name },
      spec: {
        serviceAccountName,
        automountServiceAccountToken: false,
        containers: [{ name: 'main', image: 'agent' }],
      },
    },
  );
  expect(reply.status).toBe(201);
  return reply.body.metadata.uid;
}

async function requestToken(account: string, spec: Record<string, unknown>) {
  return admin<TokenRequestReply>(
    'POST',
    `/api/v1/namespaces/${namespace}/serviceaccounts/${account}/token`,
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec,
    },
  );
}

async function review(token: string, audiences: string[] = [AUDIENCE]) {
  const reply = await admin<ReviewReply>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenReview',
    spec: { token, audiences },
  });
  expect(reply.status).toBe(201);
  return reply.body.status;
}

async function podBoundToken(pod: string, uid: string, expirationSeconds = 3600) {
  const reply = await requestToken('default', {
    audiences: [AUDIENCE],
    expirationSeconds,
    boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: pod, uid },
  });
  expect(reply.status).toBe(201);
  return reply.body.status.token;
}

describe.skipIf(REAL_CLUSTER)('service-account tokens', () => {
  beforeAll(async () => {
    double = await startKubeDouble({ tls: false, clock });
    other = await startKubeDouble({ tls: false, clock });
  });
  afterAll(async () => {
    await double?.close();
    await other?.close();
  });
  beforeEach(async () => {
    serial += 1;
    namespace = `tokens-${serial}`;
    expect(
      (await admin('POST', '/api/v1/namespaces', { metadata: { name: namespace } })).status,
    ).toBe(201);
  });

  it('mints a pod-bound JWT with the claims of a bound token', async () => {
    const uid = await createPod('worker');
    const reply = await requestToken('default', {
      audiences: [AUDIENCE],
      expirationSeconds: 600,
      boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: 'worker', uid },
    });
    expect(reply.status).toBe(201);
    const [header, payload] = reply.body.status.token.split('.');
    expect(JSON.parse(Buffer.from(header ?? '', 'base64url').toString())).toMatchObject({
      alg: 'RS256',
    });
    const claims = JSON.parse(Buffer.from(payload ?? '', 'base64url').toString()) as Record<
      string,
      unknown
    >;
    const account = (
      await admin<{ metadata: { uid: string } }>(
        'GET',
        `/api/v1/namespaces/${namespace}/serviceaccounts/default`,
      )
    ).body;
    const now = clock.now() / 1000;
    expect(claims).toEqual({
      iss: 'https://kubernetes.default.svc.cluster.local',
      sub: `system:serviceaccount:${namespace}:default`,
      aud: [AUDIENCE],
      iat: now,
      nbf: now,
      exp: now + 600,
      jti: expect.stringMatching(/^[0-9a-f-]{36}$/),
      'kubernetes.io': {
        namespace,
        serviceaccount: { name: 'default', uid: account.metadata.uid },
        pod: { name: 'worker', uid },
      },
    });
    expect(reply.body.status.expirationTimestamp).toBe(
      new Date((now + 600) * 1000).toISOString().replace('.000Z', 'Z'),
    );
  });

  it('refuses an expirationSeconds under ten minutes, as the apiserver does', async () => {
    const reply = await requestToken('default', { expirationSeconds: 599 });
    expect(reply.status).toBe(422);
    expect(reply.body).toMatchObject({
      kind: 'Status',
      reason: 'Invalid',
      message:
        'TokenRequest.authentication.k8s.io "default" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes',
    });
    expect((await requestToken('default', { expirationSeconds: 600 })).status).toBe(201);
  });

  it('refuses to bind to a pod of another account or with a stale UID', async () => {
    await admin('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, {
      metadata: { name: 'robot' },
    });
    const uid = await createPod('robot-pod', 'robot');
    const wrongAccount = await requestToken('default', {
      boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: 'robot-pod', uid },
    });
    expect(wrongAccount.status).toBe(400);
    const staleUid = await requestToken('robot', {
      boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: 'robot-pod', uid: 'not-the-uid' },
    });
    expect(staleUid.status).toBe(409);
    const missing = await requestToken('robot', {
      boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: 'no-pod' },
    });
    expect(missing.status).toBe(404);
  });

  it('authenticates a live bound token as the service authenticator reports it', async () => {
    const uid = await createPod('live');
    const token = await podBoundToken('live', uid);
    const status = await review(token);
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as {
      jti: string;
      'kubernetes.io': { serviceaccount: { uid: string } };
    };
    expect(status).toEqual({
      authenticated: true,
      audiences: [AUDIENCE],
      user: {
        username: `system:serviceaccount:${namespace}:default`,
        uid: claims['kubernetes.io'].serviceaccount.uid,
        groups: [
          'system:serviceaccounts',
          `system:serviceaccounts:${namespace}`,
          'system:authenticated',
        ],
        extra: {
          'authentication.kubernetes.io/pod-name': ['live'],
          'authentication.kubernetes.io/pod-uid': [uid],
          'authentication.kubernetes.io/credential-id': [`JTI=${claims.jti}`],
        },
      },
    });
  });

  it('still authenticates a token within the clock-skew leeway after exp, and not after it', async () => {
    const uid = await createPod('expiring');
    const token = await podBoundToken('expiring', uid, 600);
    // The authenticator allows a minute of clock skew past exp (and before nbf).
    clock.advance((600 + 60) * 1000);
    expect((await review(token)).authenticated).toBe(true);
    clock.advance(1000);
    const status = await review(token);
    expect(status.authenticated).toBeUndefined();
    expect(status.error).toBe('[invalid bearer token, service account token has expired]');
    expect(status.user).toEqual({});
  });

  it('does not authenticate a token for an audience it was not minted for', async () => {
    const uid = await createPod('audience');
    const token = await podBoundToken('audience', uid);
    expect((await review(token, ['some-other-service'])).authenticated).toBeUndefined();
    // Without audiences the review is for the apiserver's own audience, which this token lacks.
    expect((await review(token, [])).authenticated).toBeUndefined();
    expect((await review(token, ['some-other-service', AUDIENCE])).audiences).toEqual([AUDIENCE]);
  });

  it('stops authenticating a token once its pod is deleted', async () => {
    const uid = await createPod('doomed');
    const token = await podBoundToken('doomed', uid);
    expect((await review(token)).authenticated).toBe(true);
    // An unscheduled pod is deleted at once (no kubelet holds it).
    expect((await admin('DELETE', `/api/v1/namespaces/${namespace}/pods/doomed`)).status).toBe(200);
    const status = await review(token);
    expect(status.authenticated).toBeUndefined();
    expect(status.error).toBe('[invalid bearer token, service account token has been invalidated]');
  });

  it('does not authenticate a token of a pod replaced by one with the same name', async () => {
    const first = await createPod('reborn');
    const token = await podBoundToken('reborn', first);
    await admin('DELETE', `/api/v1/namespaces/${namespace}/pods/reborn`);
    const second = await createPod('reborn');
    expect(second).not.toBe(first);
    const status = await review(token);
    expect(status.authenticated).toBeUndefined();
    expect(status.error).toMatch(
      /pod UID \(.*\) does not match service account pod ref claim \(.*\)/,
    );
    expect((await review(await podBoundToken('reborn', second))).authenticated).toBe(true);
  });

  it('does not authenticate a token whose service account was recreated', async () => {
    await admin('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, {
      metadata: { name: 'temp' },
    });
    const minted = await requestToken('temp', { audiences: [AUDIENCE] });
    await admin('DELETE', `/api/v1/namespaces/${namespace}/serviceaccounts/temp`);
    expect((await review(minted.body.status.token)).authenticated).toBeUndefined();
    await admin('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, {
      metadata: { name: 'temp' },
    });
    expect((await review(minted.body.status.token)).authenticated).toBeUndefined();
  });

  it('does not authenticate a forged token: altered claims, or signed by another issuer key', async () => {
    const uid = await createPod('forged');
    const token = await podBoundToken('forged', uid);
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as { exp: number };
    claims.exp += 86_400;
    const altered = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`;
    expect((await review(altered)).authenticated).toBeUndefined();
    const foreign = await call<TokenRequestReply>(
      other.url,
      other.adminToken,
      'POST',
      '/api/v1/namespaces/default/serviceaccounts/default/token',
      {
        spec: { audiences: [AUDIENCE] },
      },
    );
    expect((await review(foreign.body.status.token)).authenticated).toBeUndefined();
    expect((await review('not-a-jwt')).authenticated).toBeUndefined();
  });

  it('accepts a live token as the bearer of an API request and refuses a dead one with 401', async () => {
    const uid = await createPod('bearer');
    const token = await podBoundToken('bearer', uid);
    // Audience-bound to Leoflow, not to the apiserver: the apiserver itself refuses it.
    expect((await call(double.url, token, 'GET', '/version')).status).toBe(401);
    const apiToken = (await requestToken('default', {})).body.status.token;
    const whoami = await call<{ status: { userInfo: { username: string } } }>(
      double.url,
      apiToken,
      'POST',
      '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      {},
    );
    expect(whoami.status).toBe(201);
    expect(whoami.body.status.userInfo.username).toBe(`system:serviceaccount:${namespace}:default`);
    clock.advance((3600 + CLOCK_LEEWAY_SECONDS + 1) * 1000);
    const expired = await call(double.url, apiToken, 'GET', '/version');
    expect(expired.status).toBe(401);
    expect(expired.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'Unauthorized',
      reason: 'Unauthorized',
      code: 401,
    });
  });
});
