/**
 * The token exchange against the apiserver double: the live side (a live attempt's pod always
 * gets its token; TokenReviews == pods) and every hostile case of issue 15 item 4, each refused
 * with its fixed, sanitised message. Double-only: it moves the apiserver's clock.
 */
import { create } from '@bufbuild/protobuf';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { ADMIN_USER, ManualClock, type KubeDouble } from '@leoflow/kube-double';
import {
  BootstrapCredentialKind,
  ExchangeTokenRequestSchema,
  LeoflowTokenScope,
} from '@leoflow/protocol';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { IDENTITY_ANNOTATION, podName } from '../../../../src/executor/kubernetes/labels.js';
import {
  EXCHANGE_AUDIENCE,
  kubeExchangeClient,
  type ExchangeKubeClient,
} from '../../../../src/executor/kubernetes/exchange/kube-token-review.js';
import { WORKER_POOL_ANNOTATION } from '../../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import {
  createTokenExchange,
  ExchangeRefused,
  type ExchangeRefusal,
  type TokenExchange,
} from '../../../../src/executor/kubernetes/exchange/token-exchange.js';
import { checkExchangeBoot } from '../../../../src/boot/exchange-boot.js';
import type { AttemptIdentity } from '../../../../src/auth/agent-token.js';
import { startKubeTestCluster, type KubeTestCluster } from '../../../support/kube-cluster.js';

const PLANTED = 'planted-secret-value-8f1c';
const SA = 'task-runner';
const clock = new ManualClock(Date.parse('2026-06-01T00:00:00Z'));
let cluster: KubeTestCluster;
let double: KubeDouble;
let kube: ExchangeKubeClient;
let adminCore: CoreV1Api;
let ns = '';
let serial = 0;

interface Ti {
  id: string;
  tenant_id: string;
  dag_id: string;
  dag_run_id: string;
  task_id: string;
  try_number: number;
  dispatch_gen: number;
  state: string;
}
const tis = new Map<string, Ti>();
const store = {
  getTaskInstanceById: (id: string) => Promise.resolve(tis.get(id)),
  getRunById: (id: string) => Promise.resolve({ id, run_id: `run-of-${id}` }),
};
let minted: AttemptIdentity[] = [];
const tokens = {
  ttlSeconds: 600,
  mint: (identity: AttemptIdentity) => {
    minted.push(identity);
    return Promise.resolve(`leoflow-attempt-token-for-${identity.task_instance_id}`);
  },
};
let reviews = 0;
let outcomes: string[] = [];
const logs: string[] = [];
const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) });

function exchangeWith(over: Partial<Parameters<typeof createTokenExchange>[0]> = {}) {
  return createTokenExchange({
    kube,
    store: store as never,
    tokens: tokens,
    clock,
    logger,
    tenantPlacement: (tenant) =>
      tenant === 'tenant-a' ? { namespace: ns, serviceAccounts: [SA] } : undefined,
    metrics: { tokenReviewed: () => void (reviews += 1), exchanged: (o) => void outcomes.push(o) },
    ...over,
  });
}
let exchange: TokenExchange;

const admin = () => double.api.context(ADMIN_USER);
const podsType = () => double.api.type('', 'pods');

function liveTi(id: string, state = 'running'): Ti {
  const ti: Ti = {
    id,
    tenant_id: 'tenant-a',
    dag_id: 'd',
    dag_run_id: `dr-${id}`,
    task_id: 't',
    try_number: 1,
    dispatch_gen: 0,
    state,
  };
  tis.set(id, ti);
  return ti;
}

/** The name the executor gives the attempt's pod: the only name the exchange accepts for it. */
const podOf = (ti: Ti) => podName(ti.id, ti.try_number, ti.dispatch_gen, ti.dag_id, ti.task_id);

/** A JWT-shaped credential with these claims and no valid signature (for stubbed reviews). */
function unsignedJwt(claims: Record<string, unknown>): string {
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${part({ alg: 'RS256' })}.${part(claims)}.c2ln`;
}
function plausibleToken(pod: string, uid: string): string {
  return unsignedJwt({
    aud: [EXCHANGE_AUDIENCE],
    exp: Math.floor(clock.now() / 1000) + 600,
    'kubernetes.io': { namespace: ns, pod: { name: pod, uid } },
  });
}

/**
 * The live client, except that TokenReview vouches for a token bound to `pod`/`uid` (a cluster
 * in its grace window, or one whose answer the test shapes); `over` changes one part of it.
 */
function vouching(
  pod: string,
  uid: string,
  over: { account?: string; audiences?: string[]; extra?: Record<string, string[]> } = {},
): ExchangeKubeClient {
  return {
    ...kube,
    reviewToken: () =>
      Promise.resolve({
        authenticated: true,
        username: `system:serviceaccount:${ns}:${over.account ?? SA}`,
        audiences: over.audiences ?? [EXCHANGE_AUDIENCE],
        extra: over.extra ?? {
          'authentication.kubernetes.io/pod-name': [pod],
          'authentication.kubernetes.io/pod-uid': [uid],
        },
      }),
  };
}

function createPod(
  name: string,
  annotations: Record<string, string>,
  serviceAccountName = SA,
  nodeName?: string,
): string {
  const pod = double.api.createObject(
    podsType(),
    ns,
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, annotations },
      spec: {
        serviceAccountName,
        automountServiceAccountToken: false,
        containers: [{ name: 'agent', image: 'agent' }],
        ...(nodeName ? { nodeName } : {}),
      },
    },
    admin(),
  ) as { metadata: { uid: string } };
  return pod.metadata.uid;
}

function attemptAnnotation(ti: string): Record<string, string> {
  return {
    [IDENTITY_ANNOTATION]: JSON.stringify({
      ti,
      tenant: 'tenant-a',
      dag: 'd',
      run: 'r',
      task: 't',
      try: 1,
      gen: 0,
    }),
  };
}

async function tokenRequest(
  account: string,
  spec: Record<string, unknown>,
): Promise<{ status: number; token: string }> {
  try {
    const reply = await adminCore.createNamespacedServiceAccountToken({
      namespace: ns,
      name: account,
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: spec as never },
    });
    return { status: 201, token: reply.status?.token ?? '' };
  } catch (err) {
    return { status: (err as { code?: number }).code ?? 0, token: '' };
  }
}

async function projected(pod: string, uid: string, audiences = [EXCHANGE_AUDIENCE], account = SA) {
  const r = await tokenRequest(account, {
    audiences,
    expirationSeconds: 600,
    boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: pod, uid },
  });
  expect(r.status).toBe(201);
  return r.token;
}

const request = (credential: string) =>
  create(ExchangeTokenRequestSchema, {
    kind: BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN,
    credential,
    protocolVersion: 1,
  });

async function refusalOf(credential: string, ex = exchange): Promise<ExchangeRefusal> {
  try {
    await ex(request(credential));
  } catch (err) {
    expect(err).toBeInstanceOf(ExchangeRefused);
    const e = err as ExchangeRefused;
    // sanitised: one fixed text per class, nothing of the apiserver's
    expect(e.rawMessage).not.toMatch(/invalid bearer token|audiences|UID|deleted|kubernetes/i);
    return e.refusal;
  }
  throw new Error('the exchange was not refused');
}

beforeAll(async () => {
  cluster = await startKubeTestCluster({ prefix: 'exchange-', double: { clock } });
  double = cluster.double;
  const kc = cluster.adminConfig();
  kube = kubeExchangeClient(kc);
  adminCore = kc.makeApiClient(CoreV1Api);
});
afterAll(async () => {
  await cluster?.stop();
  // canary: the planted value reached no log line
  expect(logs.join('\n')).not.toContain(PLANTED);
});
beforeEach(() => {
  serial += 1;
  ns = `tenant-a-${serial}`;
  double.api.createObject(
    double.api.type('', 'namespaces'),
    undefined,
    { metadata: { name: ns } },
    admin(),
  );
  for (const name of [SA, 'intruder']) {
    double.api.createObject(
      double.api.type('', 'serviceaccounts'),
      ns,
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } },
      admin(),
    );
  }
  reviews = 0;
  outcomes = [];
  minted = [];
  exchange = exchangeWith();
});

describe('the token exchange, live side', () => {
  it("a live attempt's pod always gets its attempt token; exactly one TokenReview per pod", async () => {
    const pods = 5;
    for (let i = 0; i < pods; i++) {
      const ti = liveTi(`ti-live-${serial}-${i}`);
      const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
      const res = await exchange(request(await projected(podOf(ti), uid)));
      expect(res.scope).toBe(LeoflowTokenScope.ATTEMPT);
      expect(res.token).toBe(`leoflow-attempt-token-for-${ti.id}`);
      expect(Number(res.expiresAtMs)).toBe((Math.floor(clock.now() / 1000) + 600) * 1000);
    }
    expect(reviews).toBe(pods);
    // the identity is the store's, not the annotation's (its run field said 'r')
    expect(minted[0]).toMatchObject({
      tenant_id: 'tenant-a',
      run_id: expect.stringMatching(/^run-of-dr-/),
      try_number: 1,
    });
    expect(outcomes).toEqual(Array(pods).fill('attempt'));
  });

  it('a worker-pool pod gets a WORKER token from the pool; no pool wired → refused', async () => {
    const uid = createPod('lf-warm-1', { [WORKER_POOL_ANNOTATION]: 'pool-a' });
    const token = await projected('lf-warm-1', uid);
    const issued: string[] = [];
    const withPool = exchangeWith({
      workerBootstrap: {
        issue: (pod) => {
          issued.push(`${pod.namespace}/${pod.name}/${pod.uid}/${pod.serviceAccount}`);
          return Promise.resolve({ token: 'worker-token', expiresAtMs: 42 });
        },
      },
    });
    const res = await withPool(request(token));
    expect(res.scope).toBe(LeoflowTokenScope.WORKER);
    expect(res.token).toBe('worker-token');
    expect(issued).toEqual([`${ns}/lf-warm-1/${uid}/${SA}`]);
    const uid2 = createPod('lf-warm-2', { [WORKER_POOL_ANNOTATION]: 'pool-a' });
    expect(await refusalOf(await projected('lf-warm-2', uid2))).toBe('not_a_pod');
    const declined = exchangeWith({ workerBootstrap: { issue: () => Promise.resolve(null) } });
    const uid3 = createPod('lf-warm-3', { [WORKER_POOL_ANNOTATION]: 'pool-a' });
    expect(await refusalOf(await projected('lf-warm-3', uid3), declined)).toBe('not_a_pod');
  });
});

describe('the token exchange, hostile cases (each refused)', () => {
  it('a projected token for another audience', async () => {
    const ti = liveTi(`ti-aud-${serial}`);
    const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
    expect(await refusalOf(await projected(podOf(ti), uid, ['some-other-service']))).toBe(
      'not_authenticated',
    );
    // refused on its claims, before any TokenReview; the stubbed review shows the review's
    // own refusal too, for a token whose claims lie about its audience
    expect(reviews).toBe(0);
    const otherAudience = vouching(podOf(ti), uid, { audiences: ['some-other-service'] });
    expect(
      await refusalOf(plausibleToken(podOf(ti), uid), exchangeWith({ kube: otherAudience })),
    ).toBe('not_authenticated');
    expect(reviews).toBe(1);
    expect(minted).toEqual([]);
  });

  it('an expired one', async () => {
    const ti = liveTi(`ti-exp-${serial}`);
    const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
    const token = await projected(podOf(ti), uid);
    const late = await projected(podOf(ti), uid);
    // just expired: within the screen's clock-skew leeway, so the apiserver refuses it
    clock.advance((600 + 61) * 1000);
    expect(await refusalOf(token)).toBe('not_authenticated');
    expect(reviews).toBe(1);
    // long expired: refused on its exp claim, with no TokenReview
    clock.advance(10 * 60_000);
    expect(await refusalOf(late)).toBe('not_authenticated');
    expect(reviews).toBe(1);
    expect(minted).toEqual([]);
  });

  it('one for a deleted pod', async () => {
    const ti = liveTi(`ti-del-${serial}`);
    const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
    const token = await projected(podOf(ti), uid);
    double.api.deleteObject(podsType(), ns, podOf(ti), { gracePeriodSeconds: 0 }, admin());
    expect(await refusalOf(token)).toBe('not_authenticated');
    expect(minted).toEqual([]);
  });

  it('one for a pod being deleted (its grace period), and a review naming a pod that is gone', async () => {
    const ti = liveTi(`ti-going-${serial}`);
    const uid = createPod(podOf(ti), attemptAnnotation(ti.id), SA, 'node-a');
    const token = await projected(podOf(ti), uid);
    // on a node, a delete leaves the pod terminating for its grace period: the apiserver still
    // vouches for its token, so the refusal is the control plane's read-back of the pod
    double.api.deleteObject(podsType(), ns, podOf(ti), { gracePeriodSeconds: 30 }, admin());
    expect(await refusalOf(token)).toBe('pod_gone');
    expect(reviews).toBe(1);
    const ghost = liveTi(`ti-ghost-${serial}`);
    const ghostReview = vouching(podOf(ghost), 'no-such-uid');
    expect(
      await refusalOf(
        plausibleToken(podOf(ghost), 'no-such-uid'),
        exchangeWith({ kube: ghostReview }),
      ),
    ).toBe('pod_gone');
    expect(minted).toEqual([]);
  });

  it('one for a pod re-created under the same name', async () => {
    const ti = liveTi(`ti-re-${serial}`);
    const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
    const token = await projected(podOf(ti), uid);
    double.api.deleteObject(podsType(), ns, podOf(ti), { gracePeriodSeconds: 0 }, admin());
    createPod(podOf(ti), attemptAnnotation(ti.id));
    expect(await refusalOf(token)).toBe('not_authenticated');
    // and where the review still vouched for the old uid (a cluster in its grace window), the
    // read-back of the pod by name refuses the new one
    const stale = vouching(podOf(ti), uid);
    expect(await refusalOf(plausibleToken(podOf(ti), uid), exchangeWith({ kube: stale }))).toBe(
      'identity_mismatch',
    );
    expect(minted).toEqual([]);
  });

  it('a pod under another service account', async () => {
    const ti = liveTi(`ti-sa-${serial}`);
    // the apiserver refuses to bind one account's token to a pod of another
    const uid0 = createPod(podOf(ti), attemptAnnotation(ti.id));
    expect(
      (
        await tokenRequest('intruder', {
          audiences: [EXCHANGE_AUDIENCE],
          expirationSeconds: 600,
          boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: podOf(ti), uid: uid0 },
        })
      ).status,
    ).toBe(400);
    // a pod running under an account the tenant does not run tasks as, naming a live attempt
    // (its own attempt, so the pod's name is the executor's: only the account is wrong)
    const other0 = liveTi(`ti-sa-other-${serial}`);
    const uid = createPod(podOf(other0), attemptAnnotation(other0.id), 'intruder');
    expect(
      await refusalOf(await projected(podOf(other0), uid, [EXCHANGE_AUDIENCE], 'intruder')),
    ).toBe('identity_mismatch');
    // a review whose username names another account than the pod's
    const other = vouching(podOf(ti), uid0, { account: 'intruder' });
    expect(await refusalOf(plausibleToken(podOf(ti), uid0), exchangeWith({ kube: other }))).toBe(
      'identity_mismatch',
    );
    expect(minted).toEqual([]);
  });

  it("a `kubectl create token` token for the pod's account without a pod binding", async () => {
    const ti = liveTi(`ti-ct-${serial}`);
    createPod(podOf(ti), attemptAnnotation(ti.id));
    const r = await tokenRequest(SA, { audiences: [EXCHANGE_AUDIENCE], expirationSeconds: 600 });
    expect(r.status).toBe(201);
    expect(await refusalOf(r.token)).toBe('not_a_pod');
    // refused on its claims (no pod binding), before any TokenReview; a review of such a token
    // (extras without a pod) is refused the same way
    expect(reviews).toBe(0);
    const unbound = vouching(podOf(ti), 'u', { extra: {} });
    expect(await refusalOf(plausibleToken(podOf(ti), 'u'), exchangeWith({ kube: unbound }))).toBe(
      'not_a_pod',
    );
    expect(minted).toEqual([]);
  });

  it('the same projected token twice: the second is refused, with no second TokenReview', async () => {
    const ti = liveTi(`ti-twice-${serial}`);
    const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
    const token = await projected(podOf(ti), uid);
    await exchange(request(token));
    expect(await refusalOf(token)).toBe('replayed');
    expect(reviews).toBe(1);
    // a second (rotated) token of the same pod: one more review, refused after it
    expect(await refusalOf(await projected(podOf(ti), uid))).toBe('replayed');
    expect(minted).toHaveLength(1);
  });

  it("a pod that copied a live attempt's annotation is not that attempt's pod", async () => {
    const ti = liveTi(`ti-forged-${serial}`);
    const real = createPod(podOf(ti), attemptAnnotation(ti.id));
    // anyone who may create pods in the namespace can copy the annotation; the name the
    // executor gives the attempt's pod is taken by the real one
    const forged = createPod('lf-forged', attemptAnnotation(ti.id));
    expect(await refusalOf(await projected('lf-forged', forged))).toBe('identity_mismatch');
    expect(minted).toEqual([]);
    // the real pod still gets its token (the forgery used nothing up)
    expect((await exchange(request(await projected(podOf(ti), real)))).scope).toBe(
      LeoflowTokenScope.ATTEMPT,
    );
    // once exchanged for, the attempt is not exchanged for again: not by its pod deleted and
    // re-created under the same name while the attempt is still live
    double.api.deleteObject(podsType(), ns, podOf(ti), { gracePeriodSeconds: 0 }, admin());
    const again = createPod(podOf(ti), attemptAnnotation(ti.id));
    expect(await refusalOf(await projected(podOf(ti), again))).toBe('replayed');
    expect(minted).toHaveLength(1);
  });

  it("once per attempt across replicas: the attempt's record names the pod that exchanged", async () => {
    // the store's bindExchangedPod, in memory (store.suite.ts holds the real one to the same rule)
    const bound = new Map<string, { uid: string; gen: number }>();
    const attemptRecords = {
      bindExchangedPod: (
        key: { task_instance_id: string; try_number: number },
        gen: number,
        uid: string,
      ) => {
        const k = `${key.task_instance_id}#${key.try_number}`;
        const was = bound.get(k);
        if (was && was.gen >= gen) return Promise.resolve('taken' as const);
        bound.set(k, { uid, gen });
        return Promise.resolve('bound' as const);
      },
    };
    const replicaA = exchangeWith({ attemptRecords });
    const replicaB = exchangeWith({ attemptRecords });
    const ti = liveTi(`ti-replicas-${serial}`);
    const real = createPod(podOf(ti), attemptAnnotation(ti.id));
    expect((await replicaA(request(await projected(podOf(ti), real)))).scope).toBe(
      LeoflowTokenScope.ATTEMPT,
    );
    expect(bound.get(`${ti.id}#1`)).toEqual({ uid: real, gen: 0 });
    // the attempt's pod deleted and re-created under the same name, exchanging on the replica
    // that has no memory of the first exchange: the shared record refuses it
    double.api.deleteObject(podsType(), ns, podOf(ti), { gracePeriodSeconds: 0 }, admin());
    const again = createPod(podOf(ti), attemptAnnotation(ti.id));
    expect(await refusalOf(await projected(podOf(ti), again), replicaB)).toBe('replayed');
    expect(minted).toHaveLength(2); // minted on B, never handed out
    // a re-dispatch (generation 1) gets its own pod and its own exchange
    ti.dispatch_gen = 1;
    const redispatched = liveTi(`ti-replicas-${serial}`);
    redispatched.dispatch_gen = 1;
    const gen1 = createPod(podOf(redispatched), {
      [IDENTITY_ANNOTATION]: JSON.stringify({ ti: ti.id, tenant: 'tenant-a', try: 1, gen: 1 }),
    });
    expect((await replicaB(request(await projected(podOf(redispatched), gen1)))).scope).toBe(
      LeoflowTokenScope.ATTEMPT,
    );
    // a record that cannot be written decides nothing: unavailable, and the retry succeeds
    const flakyRecords = {
      bindExchangedPod: vi
        .fn()
        .mockRejectedValueOnce(new Error('connection terminated'))
        .mockResolvedValue('bound'),
    };
    const flaky = exchangeWith({ attemptRecords: flakyRecords });
    const other = liveTi(`ti-replicas-flaky-${serial}`);
    const uid = createPod(podOf(other), attemptAnnotation(other.id));
    const token = await projected(podOf(other), uid);
    expect(await refusalOf(token, flaky)).toBe('unavailable');
    expect((await flaky(request(token))).scope).toBe(LeoflowTokenScope.ATTEMPT);
  });

  it('garbage and screened tokens cost no TokenReview; a burst past the cap is Unavailable (overloaded)', async () => {
    for (let i = 0; i < 100; i++) {
      expect(await refusalOf(`garbage-${i}-${'x'.repeat(i)}`)).toBe('malformed');
    }
    expect(await refusalOf(unsignedJwt({ aud: 'elsewhere', exp: 9e9 }))).toBe('not_authenticated');
    // screened before its hash is remembered: the same garbage again is screened again, not a
    // "replay" (the replay memory keeps room for tokens that reached a decision)
    expect(await refusalOf(unsignedJwt({ aud: 'elsewhere', exp: 9e9 }))).toBe('not_authenticated');
    expect(await refusalOf(unsignedJwt({ aud: [EXCHANGE_AUDIENCE], exp: 1 }))).toBe(
      'not_authenticated',
    );
    expect(await refusalOf(unsignedJwt({ aud: [EXCHANGE_AUDIENCE], exp: 9e9 }))).toBe('not_a_pod');
    expect(reviews).toBe(0);
    // plausible-looking tokens reach a review, at most `maxConcurrentReviews` at a time
    const release: Array<() => void> = [];
    const hanging: ExchangeKubeClient = {
      ...kube,
      reviewToken: () =>
        new Promise((resolve) =>
          release.push(() => resolve({ authenticated: false, detail: 'no' })),
        ),
    };
    const capped = exchangeWith({ kube: hanging, maxConcurrentReviews: 3 });
    const inFlight = [0, 1, 2].map((i) => refusalOf(plausibleToken(`lf-${i}`, `u${i}`), capped));
    expect(await refusalOf(plausibleToken('lf-3', 'u3'), capped)).toBe('overloaded');
    expect(reviews).toBe(3);
    release.splice(0).forEach((r) => r());
    expect(await Promise.all(inFlight)).toEqual(Array(3).fill('not_authenticated'));
    // the refused burst used nothing up: the same token is reviewed once the cap has room
    const later = refusalOf(plausibleToken('lf-3', 'u3'), capped);
    await vi.waitFor(() => expect(release).toHaveLength(1));
    release.splice(0).forEach((r) => r());
    expect(await later).toBe('not_authenticated');
    expect(reviews).toBe(4);
  });

  it('the same token twice at once: the second is asked to retry, not refused as a replay', async () => {
    const ti = liveTi(`ti-concurrent-${serial}`);
    const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
    const token = await projected(podOf(ti), uid);
    let release: () => void = () => undefined;
    const slow: ExchangeKubeClient = {
      ...kube,
      reviewToken: (t, a) =>
        new Promise((resolve, reject) => {
          release = () => void kube.reviewToken(t, a).then(resolve, reject);
        }),
    };
    const ex = exchangeWith({ kube: slow });
    const first = ex(request(token));
    await vi.waitFor(() => expect(reviews).toBe(1));
    // the agent's retry overtaking its own first try (its call timed out): Unavailable
    expect(await refusalOf(token, ex)).toBe('unavailable');
    release();
    expect((await first).scope).toBe(LeoflowTokenScope.ATTEMPT);
    // decided now: a replay
    expect(await refusalOf(token, ex)).toBe('replayed');
    expect(reviews).toBe(1);
  });

  it('an apiserver call that does not answer in time decides nothing and frees its slot', async () => {
    const ti = liveTi(`ti-hung-${serial}`);
    const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
    const token = await projected(podOf(ti), uid);
    let hangs = 1;
    const hung: ExchangeKubeClient = {
      ...kube,
      readPod: (n, name) => (hangs-- > 0 ? new Promise(() => undefined) : kube.readPod(n, name)),
    };
    // long enough for the double's real answers on a loaded machine; the hung call never answers
    const ex = exchangeWith({ kube: hung, apiserverTimeoutMs: 1_000, maxConcurrentReviews: 1 });
    expect(await refusalOf(token, ex)).toBe('unavailable');
    // the one slot is free again, and the token, pod and attempt are unused: the retry succeeds
    expect((await ex(request(token))).token).toBe(`leoflow-attempt-token-for-${ti.id}`);
    expect(logs.join('\n')).toMatch(/reading the exchanging pod failed/);
  });

  it('an exchange the apiserver or the store could not decide uses nothing up: the retry succeeds', async () => {
    const ti = liveTi(`ti-flaky-${serial}`);
    const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
    const token = await projected(podOf(ti), uid);
    let reviewFailures = 1;
    const flakyKube: ExchangeKubeClient = {
      ...kube,
      reviewToken: (t, a) =>
        reviewFailures-- > 0
          ? Promise.reject(Object.assign(new Error('too many requests'), { code: 429 }))
          : kube.reviewToken(t, a),
    };
    let storeFailures = 1;
    const flakyStore = {
      ...store,
      getTaskInstanceById: (id: string) =>
        storeFailures-- > 0
          ? Promise.reject(new Error('SQLITE_BUSY: database is locked'))
          : store.getTaskInstanceById(id),
    };
    const flaky = exchangeWith({ kube: flakyKube, store: flakyStore as never });
    expect(await refusalOf(token, flaky)).toBe('unavailable');
    expect(await refusalOf(token, flaky)).toBe('unavailable');
    const res = await flaky(request(token));
    expect(res.token).toBe(`leoflow-attempt-token-for-${ti.id}`);
    expect(reviews).toBe(3);
    // and once decided, the token and the pod are used up
    expect(await refusalOf(token, flaky)).toBe('replayed');
    expect(minted).toHaveLength(1);
    expect(logs.join('\n')).not.toContain('SQLITE_BUSY');
  });

  it('a pod whose annotation names an attempt no longer live', async () => {
    for (const [name, mutate] of [
      ['lf-done', (t: Ti) => (t.state = 'success')],
      ['lf-retried', (t: Ti) => (t.try_number = 2)],
      ['lf-redispatched', (t: Ti) => (t.dispatch_gen = 1)],
      ['lf-gone', (t: Ti) => void tis.delete(t.id)],
    ] as const) {
      const ti = liveTi(`ti-${name}-${serial}`);
      const uid = createPod(podOf(ti), attemptAnnotation(ti.id));
      const token = await projected(podOf(ti), uid);
      mutate(ti);
      expect([name, await refusalOf(token)]).toEqual([name, 'not_live']);
    }
    expect(minted).toEqual([]);
  });

  it('a pod with both annotations, or neither', async () => {
    const ti = liveTi(`ti-both-${serial}`);
    const both = createPod('lf-both', {
      ...attemptAnnotation(ti.id),
      [WORKER_POOL_ANNOTATION]: 'p',
    });
    const none = createPod('lf-none', {});
    const withPool = exchangeWith({
      workerBootstrap: { issue: () => Promise.resolve({ token: 'w', expiresAtMs: 1 }) },
    });
    expect(await refusalOf(await projected('lf-both', both), withPool)).toBe('not_a_pod');
    expect(await refusalOf(await projected('lf-none', none), withPool)).toBe('not_a_pod');
  });

  it('an attempt of a tenant whose namespace is another', async () => {
    const ti = liveTi(`ti-ns-${serial}`);
    ti.tenant_id = 'tenant-b';
    const uid = createPod(podOf(ti), {
      [IDENTITY_ANNOTATION]: JSON.stringify({ ti: ti.id, tenant: 'tenant-b', try: 1, gen: 0 }),
    });
    expect(await refusalOf(await projected(podOf(ti), uid))).toBe('identity_mismatch');
    // the same pod is the attempt's once tenant-b's placement is this namespace (the control)
    const placed = exchangeWith({
      tenantPlacement: (t) =>
        t === 'tenant-b' ? { namespace: ns, serviceAccounts: [SA] } : undefined,
    });
    expect((await placed(request(await projected(podOf(ti), uid)))).scope).toBe(
      LeoflowTokenScope.ATTEMPT,
    );
  });

  it('a malformed request, and an apiserver failure, answer fixed texts', async () => {
    expect(await refusalOf('')).toBe('malformed');
    expect(await refusalOf('x'.repeat(17 * 1024))).toBe('malformed');
    expect(await refusalOf(`tok-${PLANTED}`)).toBe('malformed');
    expect(reviews).toBe(0);
    const down: ExchangeKubeClient = {
      ...kube,
      reviewToken: () => Promise.reject(new Error(`connect ECONNREFUSED ${PLANTED}`)),
    };
    expect(await refusalOf(plausibleToken('lf-x', 'u'), exchangeWith({ kube: down }))).toBe(
      'unavailable',
    );
    expect(reviews).toBe(1);
  });
});

describe('exchange boot check', () => {
  it('fails closed without a Kubernetes client, over cleartext non-loopback, without TokenReview permission; passes with it', async () => {
    const code = async (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (e: { code?: string }) => e.code,
      );
    expect(await code(checkExchangeBoot({ kube: null, channelMode: 'tls' }))).toBe(
      'LF_EXCHANGE_NO_KUBERNETES',
    );
    expect(await code(checkExchangeBoot({ kube, channelMode: 'cleartext-non-loopback' }))).toBe(
      'LF_EXCHANGE_INSECURE_CHANNEL',
    );
    const plane = await startKubeTestCluster({
      prefix: 'exchange-',
      double: {
        staticTokens: {
          'cp-token': {
            username: 'system:serviceaccount:leoflow:leoflow-control-plane',
            groups: ['system:serviceaccounts', 'system:authenticated'],
          },
        },
      },
    });
    try {
      const kc = new KubeConfig();
      kc.loadFromFile(plane.writeKubeconfig({ token: 'cp-token', file: 'cp.kubeconfig' }));
      const cp = kubeExchangeClient(kc);
      expect(await code(checkExchangeBoot({ kube: cp, channelMode: 'tls' }))).toBe(
        'LF_EXCHANGE_TOKENREVIEW_FORBIDDEN',
      );
      // and the exchange call itself is forbidden (403) without the grant
      await expect(cp.reviewToken('x', [EXCHANGE_AUDIENCE])).rejects.toMatchObject({ code: 403 });
      const sys = plane.double.api.context(ADMIN_USER);
      plane.double.api.createObject(
        plane.double.api.type('rbac.authorization.k8s.io', 'clusterroles'),
        undefined,
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRole',
          metadata: { name: 'leoflow-tokenreview' },
          rules: [
            {
              apiGroups: ['authentication.k8s.io'],
              resources: ['tokenreviews'],
              verbs: ['create'],
            },
          ],
        },
        sys,
      );
      plane.double.api.createObject(
        plane.double.api.type('rbac.authorization.k8s.io', 'clusterrolebindings'),
        undefined,
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRoleBinding',
          metadata: { name: 'leoflow-tokenreview' },
          roleRef: {
            apiGroup: 'rbac.authorization.k8s.io',
            kind: 'ClusterRole',
            name: 'leoflow-tokenreview',
          },
          subjects: [
            { kind: 'ServiceAccount', name: 'leoflow-control-plane', namespace: 'leoflow' },
          ],
        },
        sys,
      );
      expect(await code(checkExchangeBoot({ kube: cp, channelMode: 'tls' }))).toBe('ok');
      expect(await cp.reviewToken('x', [EXCHANGE_AUDIENCE])).toMatchObject({
        authenticated: false,
      });
    } finally {
      await plane.stop();
    }
  });
});
