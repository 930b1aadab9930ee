/**
 * The SecretKeyRef fallback (auth.exchange_bootstrap=secret_key_ref) against the apiserver double:
 * the Kubernetes executor creates each attempt's bootstrap Secret before its pod, owns it to the
 * pod and removes it when the attempt ends; the exchange checks the Secret, its one controller
 * owner and the pod, deletes the Secret and mints. Two-sided: a live attempt's value is always
 * exchanged, and every hostile value is refused with the fixed, sanitised text of its class.
 * No TokenReview is sent on this path.
 */
import { create } from '@bufbuild/protobuf';
import type { KubeConfig } from '@kubernetes/client-node';
import { ADMIN_USER, type KubeDouble } from '@leoflow/kube-double';
import {
  BootstrapCredentialKind,
  ExchangeTokenRequestSchema,
  LeoflowTokenScope,
} from '@leoflow/protocol';
import { ManualClock } from '@leoflow/core';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AttemptIdentity } from '../../../../src/auth/agent-token.js';
import type { KubernetesExecutorConfig } from '../../../../src/config/server-config.js';
import {
  BOOTSTRAP_SECRET_KEY,
  EXCHANGE_BOOTSTRAP_ENV,
  bootstrapSecretName,
  newBootstrapValue,
} from '../../../../src/executor/kubernetes/exchange/bootstrap-secret.js';
import { checkExchangeBoot } from '../../../../src/boot/exchange-boot.js';
import {
  kubeBootstrapSecretClient,
  type BootstrapSecretKube,
} from '../../../../src/executor/kubernetes/exchange/kube-bootstrap-secret.js';
import { kubeExchangeClient } from '../../../../src/executor/kubernetes/exchange/kube-token-review.js';
import { WORKER_POOL_ANNOTATION } from '../../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import {
  createTokenExchange,
  ExchangeRefused,
  type ExchangeRefusal,
  type TokenExchange,
} from '../../../../src/executor/kubernetes/exchange/token-exchange.js';
import { KubernetesExecutor } from '../../../../src/executor/kubernetes/kubernetes-executor.js';
import { IDENTITY_ANNOTATION, LABEL, podName } from '../../../../src/executor/kubernetes/labels.js';
import { EXCHANGE_TOKEN_VOLUME } from '../../../../src/executor/kubernetes/projected-token.js';
import { secretKeyRefExchangeTransport } from '../../../../src/executor/kubernetes/token-transport.js';
import { startKubeTestCluster, type KubeTestCluster } from '../../../support/kube-cluster.js';

const NS = 'tenant-a-tasks';
const OTHER_NS = 'tenant-b-tasks';
const SA = 'task-runner';
/** a user that may handle secrets and watch pods, but not create them */
const NO_PODS_TOKEN = 'no-pod-create-token';
const clock = new ManualClock(Date.parse('2026-06-01T00:00:00Z'));
let cluster: KubeTestCluster;
let double: KubeDouble;
let kc: KubeConfig;
let secretKube: BootstrapSecretKube;
let executor: KubernetesExecutor;

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
const tokens = {
  ttlSeconds: 600,
  mint: (identity: AttemptIdentity) =>
    Promise.resolve(`leoflow-attempt-token-for-${identity.task_instance_id}`),
};
let reviews = 0;
const outcomes: string[] = [];
const logs: string[] = [];
const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) });
/** every bootstrap value the executor created, for the canaries */
const values: string[] = [];
const responses: string[] = [];

function exchangeFor(namespaces = [NS]): TokenExchange {
  const ex = createTokenExchange({
    kube: kubeExchangeClient(kc),
    bootstrapSecrets: { kube: secretKube, namespaces },
    store: store as never,
    tokens,
    clock,
    logger,
    tenantPlacement: (tenant) =>
      tenant === 'tenant-a' ? { namespace: NS, serviceAccounts: [SA] } : undefined,
    metrics: { tokenReviewed: () => void (reviews += 1), exchanged: (o) => void outcomes.push(o) },
  });
  return async (req) => {
    const res = await ex(req);
    responses.push(JSON.stringify({ ...res, expiresAtMs: String(res.expiresAtMs) }));
    return res;
  };
}
let exchange: TokenExchange;

const admin = () => double.api.context(ADMIN_USER);
const podsType = () => double.api.type('', 'pods');
const secretsType = () => double.api.type('', 'secrets');

const request = (credential: string) =>
  create(ExchangeTokenRequestSchema, {
    kind: BootstrapCredentialKind.BOOTSTRAP_SECRET,
    credential,
    protocolVersion: 1,
  });

async function refusalOf(credential: string, ex = exchange): Promise<ExchangeRefusal> {
  try {
    await ex(request(credential));
  } catch (err) {
    expect(err).toBeInstanceOf(ExchangeRefused);
    const e = err as ExchangeRefused;
    responses.push(e.rawMessage);
    expect(e.rawMessage).not.toMatch(/secrets? "|not found|forbidden|UID|kubernetes/i);
    return e.refusal;
  }
  throw new Error('the exchange was not refused');
}

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

function identityOf(ti: Ti): AttemptIdentity {
  return {
    tenant_id: ti.tenant_id,
    dag_id: ti.dag_id,
    dag_run_id: ti.dag_run_id,
    run_id: `run-of-${ti.dag_run_id}`,
    task_id: ti.task_id,
    try_number: ti.try_number,
    task_instance_id: ti.id,
    dispatch_gen: ti.dispatch_gen,
  };
}

interface StoredSecret {
  metadata: {
    name: string;
    uid: string;
    labels?: Record<string, string>;
    ownerReferences?: { kind: string; name: string; uid: string; controller?: boolean }[];
  };
  data?: Record<string, string>;
}
function storedSecret(namespace: string, name: string): StoredSecret | undefined {
  return double.store.list(secretsType(), namespace).find((s) => s.metadata.name === name) as
    StoredSecret | undefined;
}
function storedPod(name: string): Record<string, unknown> | undefined {
  return double.store.list(podsType(), NS).find((p) => p.metadata.name === name);
}
const decode = (b64: string) => Buffer.from(b64, 'base64').toString('utf8');

/** An attempt started by the executor; its value as the kubelet would hand it to the agent. */
async function started(id: string): Promise<{ pod: string; value: string; uid: string }> {
  const ti = liveTi(id);
  const { hostname: startedAs } = await executor.start({
    identity: identityOf(ti),
    credential: { mint: () => Promise.reject(new Error('the exchange mints nothing at create')) },
    agentUrl: 'http://127.0.0.1:1',
    heartbeatIntervalMs: 1_000,
  });
  const hostname = startedAs!;
  const secret = storedSecret(NS, bootstrapSecretName(hostname))!;
  const value = decode(secret.data![BOOTSTRAP_SECRET_KEY]!);
  values.push(value);
  return { pod: hostname, value, uid: (storedPod(hostname)!.metadata as { uid: string }).uid };
}

/** A pod and its owned bootstrap Secret made by hand (no executor watching to clean up). */
function planted(
  name: string,
  annotations: Record<string, string>,
  opts: {
    owner?: Record<string, unknown>[];
    secretName?: string;
    namespace?: string;
    /** bound to a node: a graceful delete then leaves it terminating, not gone */
    nodeName?: string;
  } = {},
): { value: string; uid: string } {
  const namespace = opts.namespace ?? NS;
  const pod = double.api.createObject(
    podsType(),
    namespace,
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, annotations },
      spec: {
        serviceAccountName: SA,
        containers: [{ name: 'agent', image: 'agent' }],
        ...(opts.nodeName ? { nodeName: opts.nodeName } : {}),
      },
    },
    admin(),
  ) as { metadata: { uid: string } };
  const secretName = opts.secretName ?? bootstrapSecretName(name);
  const value = newBootstrapValue({ namespace, name: secretName });
  values.push(value);
  double.api.createObject(
    secretsType(),
    namespace,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: secretName,
        ownerReferences: opts.owner ?? [
          { apiVersion: 'v1', kind: 'Pod', name, uid: pod.metadata.uid, controller: true },
        ],
      },
      data: { [BOOTSTRAP_SECRET_KEY]: Buffer.from(value).toString('base64') },
    },
    admin(),
  );
  return { value, uid: pod.metadata.uid };
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

function deletePodNow(name: string, namespace = NS): void {
  double.api.deleteObject(podsType(), namespace, name, { gracePeriodSeconds: 0 }, admin());
}

async function waitFor(what: string, probe: () => boolean, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function executorConfig(): KubernetesExecutorConfig {
  return {
    kubeconfig: cluster.kubeconfig,
    agentImage: 'leoflow-agent:skr',
    agentUrl: 'http://127.0.0.1:1',
    podStartTimeoutMs: 60_000,
    instance: 'skr',
    runAsUser: 65532,
    terminationGracePeriodSeconds: 0,
    agentCaConfigMap: null,
    keepFinishedPods: true,
    tenants: {
      'tenant-a': {
        namespace: NS,
        images: [],
        serviceAccounts: [SA],
        maxResources: { cpu: '1', memory: '1Gi' },
        defaultResources: {},
      },
    },
  };
}

beforeAll(async () => {
  cluster = await startKubeTestCluster({
    prefix: 'leoflow-secret-bootstrap-',
    double: { staticTokens: { [NO_PODS_TOKEN]: { username: 'no-pod-create', groups: [] } } },
    namespaces: { [NS]: [SA], [OTHER_NS]: [SA] },
  });
  double = cluster.double;
  kc = cluster.adminConfig();
  secretKube = kubeBootstrapSecretClient(kc);
  executor = new KubernetesExecutor({
    config: executorConfig(),
    logger,
    attemptLive: (id) => Promise.resolve(tis.get(id.task_instance_id)?.state === 'running'),
    transport: secretKeyRefExchangeTransport,
    sweepIntervalMs: 100,
  });
  await executor.whenSynced();
  exchange = exchangeFor();
});

afterEach(() => {
  // this path never sends a TokenReview
  expect(reviews).toBe(0);
});

afterAll(async () => {
  await executor?.close();
  // canaries: no bootstrap value in any pod spec as stored, any log line or any answer
  const pods = JSON.stringify(double.store.list(podsType()));
  const text = logs.join('\n');
  const answers = responses.join('\n');
  expect(values.length).toBeGreaterThan(8);
  for (const v of values) {
    expect(pods).not.toContain(v);
    expect(text).not.toContain(v);
    expect(answers).not.toContain(v);
    // nor its random part alone, nor its base64 as stored in the Secret
    expect(text).not.toContain(v.split('/')[2]!);
    expect(text).not.toContain(Buffer.from(v).toString('base64'));
  }
  await cluster?.stop();
});

describe('the executor under secret_key_ref', () => {
  it('creates the Secret first, owned by the pod; the Pod holds a secretKeyRef, nothing else', async () => {
    const added: string[] = [];
    const stop = double.store.watchFrom(double.store.currentRevision(), (e) => {
      if (e.type === 'ADDED') added.push(e.resourceType.resource);
    });
    const { pod, value, uid } = await started('ti-shape');
    stop();
    expect(added).toEqual(['secrets', 'pods']);
    const secret = storedSecret(NS, bootstrapSecretName(pod))!;
    expect(secret.metadata.ownerReferences).toEqual([
      expect.objectContaining({ apiVersion: 'v1', kind: 'Pod', name: pod, uid, controller: true }),
    ]);
    expect(secret.metadata.labels).toMatchObject({
      [LABEL.component]: 'exchange-bootstrap',
      [LABEL.taskInstance]: 'ti-shape',
      [LABEL.try]: '1',
    });
    expect(value).toMatch(new RegExp(`^${NS}/${bootstrapSecretName(pod)}/[A-Za-z0-9_-]{43}$`));
    const spec = storedPod(pod)!.spec as {
      volumes: { name: string }[];
      containers: { env: { name: string; value?: string; valueFrom?: unknown }[] }[];
    };
    expect(spec.volumes.map((v) => v.name)).not.toContain(EXCHANGE_TOKEN_VOLUME);
    const env = spec.containers[0]!.env.find((e) => e.name === EXCHANGE_BOOTSTRAP_ENV);
    expect(env).toEqual({
      name: EXCHANGE_BOOTSTRAP_ENV,
      valueFrom: { secretKeyRef: { name: bootstrapSecretName(pod), key: BOOTSTRAP_SECRET_KEY } },
    });
    expect(JSON.stringify(storedPod(pod))).not.toContain(value);
  });

  it('removes the Secret when the attempt ends (pod finished; attempt terminated)', async () => {
    const done = await started('ti-end-1');
    const pod = storedPod(done.pod)!;
    double.api.updateObject(
      podsType(),
      NS,
      done.pod,
      'status',
      {
        ...pod,
        status: {
          phase: 'Succeeded',
          containerStatuses: [{ name: 'agent', state: { terminated: { exitCode: 0 } } }],
        },
      },
      admin(),
    );
    await waitFor(
      'the finished attempt’s Secret to go',
      () => !storedSecret(NS, bootstrapSecretName(done.pod)),
    );
    // keepFinishedPods: the pod stays, its credential does not
    expect(storedPod(done.pod)).toBeDefined();

    const stopped = await started('ti-end-2');
    await executor.terminate('ti-end-2', 1);
    expect(storedSecret(NS, bootstrapSecretName(stopped.pod))).toBeUndefined();
    // either way its value no longer exchanges
    expect(await refusalOf(stopped.value)).toBe('not_authenticated');
  });
});

describe('the executor under secret_key_ref, a pod that cannot be created', () => {
  it('leaves no bootstrap Secret behind (and the live control: the same start as admin works)', async () => {
    const rbac = (resource: string) => double.api.type('rbac.authorization.k8s.io', resource);
    double.api.createObject(
      rbac('roles'),
      NS,
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name: 'no-pod-create' },
        rules: [
          { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'get', 'patch', 'delete'] },
          { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'delete'] },
        ],
      },
      admin(),
    );
    double.api.createObject(
      rbac('rolebindings'),
      NS,
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'no-pod-create' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'no-pod-create' },
        subjects: [{ kind: 'User', name: 'no-pod-create' }],
      },
      admin(),
    );
    const limited = new KubernetesExecutor({
      config: {
        ...executorConfig(),
        kubeconfig: cluster.writeKubeconfig({ token: NO_PODS_TOKEN, file: 'limited.kubeconfig' }),
      },
      logger,
      attemptLive: () => Promise.resolve(true),
      transport: secretKeyRefExchangeTransport,
    });
    try {
      await limited.whenSynced();
      const ti = liveTi('ti-no-pod');
      const secretsBefore = double.store.list(secretsType(), NS).length;
      await expect(
        limited.start({
          identity: identityOf(ti),
          credential: { mint: () => Promise.reject(new Error('not minted')) },
          agentUrl: 'http://127.0.0.1:1',
          heartbeatIntervalMs: 1_000,
        }),
      ).rejects.toMatchObject({ code: 'LF_POD_CREATE_FAILED' });
      expect(double.store.list(secretsType(), NS).length).toBe(secretsBefore);
    } finally {
      await limited.close();
    }
    const { pod } = await started('ti-no-pod');
    expect(storedSecret(NS, bootstrapSecretName(pod))).toBeDefined();
  });
});

describe('the exchange of a bootstrap Secret, live side', () => {
  it('a live attempt exchanges once for its attempt token; the Secret is deleted', async () => {
    for (let i = 0; i < 3; i++) {
      const { pod, value } = await started(`ti-live-${i}`);
      const res = await exchange(request(value));
      expect(res.scope).toBe(LeoflowTokenScope.ATTEMPT);
      expect(res.token).toBe(`leoflow-attempt-token-for-ti-live-${i}`);
      expect(storedSecret(NS, bootstrapSecretName(pod))).toBeUndefined();
    }
    expect(outcomes.slice(-3)).toEqual(['attempt', 'attempt', 'attempt']);
  });

  it('a hostile value first does not spoil the live one', async () => {
    const { value } = await started('ti-after-hostile');
    const forged = value.slice(0, -43) + 'A'.repeat(43);
    expect(await refusalOf(forged)).toBe('not_authenticated');
    expect((await exchange(request(value))).token).toBe(
      'leoflow-attempt-token-for-ti-after-hostile',
    );
  });
});

describe('the exchange of a bootstrap Secret, hostile side', () => {
  it('a wrong value under the right locator is refused, even one byte off', async () => {
    const { value } = await started('ti-wrong');
    const last = value.at(-1) === 'A' ? 'B' : 'A';
    expect(await refusalOf(value.slice(0, -1) + last)).toBe('not_authenticated');
    expect(await refusalOf(value + 'A')).toBe('malformed');
  });

  it('replay: refused on this replica, and on another (the Secret is gone)', async () => {
    const { value } = await started('ti-replay');
    await exchange(request(value));
    expect(await refusalOf(value)).toBe('replayed');
    expect(await refusalOf(value, exchangeFor())).toBe('not_authenticated');
  });

  it('two replicas racing on one value: exactly one mints', async () => {
    const { value } = await started('ti-race');
    const settled = await Promise.allSettled([
      exchangeFor()(request(value)),
      exchangeFor()(request(value)),
    ]);
    expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
  });

  it("another pod's Secret, or a locator in another namespace, is refused", async () => {
    const ti = liveTi('ti-other-pod');
    // a Secret named for pod x but owned by pod y
    const y = planted('lf-y', attemptAnnotation(ti.id), {
      secretName: bootstrapSecretName('lf-x'),
    });
    expect(await refusalOf(y.value)).toBe('identity_mismatch');
    // no controller owner, or one that is not a pod
    const orphan = planted('lf-orphan', attemptAnnotation(ti.id), { owner: [] });
    expect(await refusalOf(orphan.value)).toBe('not_a_pod');
    const rs = planted('lf-rs', attemptAnnotation(ti.id), {
      owner: [
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'lf-rs', uid: 'u', controller: true },
      ],
    });
    expect(await refusalOf(rs.value)).toBe('not_a_pod');
    // a well-formed pod and Secret in a namespace that is not a tenant's: never even read
    const other = planted(podOf(ti), attemptAnnotation(ti.id), { namespace: OTHER_NS });
    expect(await refusalOf(other.value)).toBe('not_authenticated');
    // ... and if that namespace were listed, the tenant's placement still refuses it
    expect(await refusalOf(other.value, exchangeFor([NS, OTHER_NS]))).toBe('identity_mismatch');
    // a pod under another name than the executor gives the attempt's pod is not its pod
    const renamed = planted('lf-renamed', attemptAnnotation(ti.id));
    expect(await refusalOf(renamed.value)).toBe('identity_mismatch');
    // the live control: a correctly planted pod of the same attempt exchanges
    const good = planted(podOf(ti), attemptAnnotation(ti.id));
    expect((await exchange(request(good.value))).scope).toBe(LeoflowTokenScope.ATTEMPT);
  });

  it('a deleted pod, and a pod re-created under the same name, are refused', async () => {
    const ti = liveTi('ti-recreated');
    const gone = planted('lf-gone', attemptAnnotation(ti.id));
    deletePodNow('lf-gone');
    expect(await refusalOf(gone.value)).toBe('pod_gone');
    // terminating (a graceful delete in progress) is gone too
    const going = planted('lf-going', attemptAnnotation(ti.id), { nodeName: 'node-a' });
    double.api.deleteObject(podsType(), NS, 'lf-going', { gracePeriodSeconds: 30 }, admin());
    expect(storedPod('lf-going')?.metadata).toHaveProperty('deletionTimestamp');
    expect(await refusalOf(going.value)).toBe('pod_gone');

    const first = planted('lf-again', attemptAnnotation(ti.id));
    deletePodNow('lf-again');
    const second = double.api.createObject(
      podsType(),
      NS,
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'lf-again', annotations: attemptAnnotation(ti.id) },
        spec: { serviceAccountName: SA, containers: [{ name: 'agent', image: 'agent' }] },
      },
      admin(),
    ) as { metadata: { uid: string } };
    expect(second.metadata.uid).not.toBe(first.uid);
    expect(await refusalOf(first.value)).toBe('identity_mismatch');
  });

  it('an attempt no longer live is refused, and keeps its Secret for the executor to remove', async () => {
    const ti = liveTi('ti-ended', 'success');
    const p = planted(podOf(ti), attemptAnnotation(ti.id));
    expect(await refusalOf(p.value)).toBe('not_live');
    // the live control: the same pod while the attempt is running
    ti.state = 'running';
    expect((await exchangeFor()(request(p.value))).scope).toBe(LeoflowTokenScope.ATTEMPT);
  });

  it('a warm-pool pod is refused on this path (warm pools need projected tokens)', async () => {
    const p = planted('lf-warm', { [WORKER_POOL_ANNOTATION]: 'pool-a' });
    expect(await refusalOf(p.value)).toBe('not_a_pod');
    // a pool pod that also names a live attempt is still a pool pod
    const ti = liveTi('ti-warm');
    const both = planted('lf-warm-both', {
      ...attemptAnnotation(ti.id),
      [WORKER_POOL_ANNOTATION]: 'pool-a',
    });
    expect(await refusalOf(both.value)).toBe('not_a_pod');
  });

  it('without the fallback configured a BOOTSTRAP_SECRET request is malformed', async () => {
    const { value } = await started('ti-not-configured');
    const plain = createTokenExchange({
      kube: kubeExchangeClient(kc),
      store: store as never,
      tokens,
      clock,
      logger,
      tenantPlacement: () => ({ namespace: NS, serviceAccounts: [SA] }),
    });
    expect(await refusalOf(value, plain)).toBe('malformed');
  });
});

describe('boot under secret_key_ref', () => {
  const kube = {
    reviewToken: () => Promise.reject(new Error('no TokenReview on this path')),
    readPod: () => Promise.resolve(null),
    canCreateTokenReviews: () => Promise.resolve(false),
  };
  it('fails closed naming the missing right and the component that grants it', async () => {
    const missing: BootstrapSecretKube = {
      ...secretKube,
      missingSecretRights: (nss) => Promise.resolve(nss.map((n) => `patch in ${n}`)),
    };
    await expect(
      checkExchangeBoot({
        kube,
        channelMode: 'tls',
        secretBootstrap: { kube: missing, namespaces: [NS] },
      }),
    ).rejects.toMatchObject({
      code: 'LF_EXCHANGE_SECRET_RIGHTS_MISSING',
      message: expect.stringMatching(
        new RegExp(`patch in ${NS}.*deploy/components/exchange-secret-fallback`),
      ),
    });
  });
  it('with warm pools on, the TokenReview right is asked for as well (pools need projected tokens)', async () => {
    await expect(
      checkExchangeBoot({
        kube,
        channelMode: 'tls',
        secretBootstrap: { kube: secretKube, namespaces: [NS] },
        alsoTokenReviews: true,
      }),
    ).rejects.toMatchObject({ code: 'LF_EXCHANGE_TOKENREVIEW_FORBIDDEN' });
  });
  it('boots with the rights (admin), TokenReview permission not asked', async () => {
    await expect(
      checkExchangeBoot({
        kube,
        channelMode: 'tls',
        secretBootstrap: { kube: secretKube, namespaces: [NS, OTHER_NS] },
      }),
    ).resolves.toBeUndefined();
  });
});
