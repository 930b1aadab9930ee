/**
 * The token exchange against a REAL cluster — whatever KUBECONFIG points to (kind, GKE, …). Owed
 * by seed 001: auth.agent_token_transport=exchange stays non-default until this has passed on a
 * real cluster (docs/pro.md). Skipped, with its reason in the title, when KUBECONFIG is unset.
 *
 * The kubeconfig's user must be able to create namespaces, service accounts, pods,
 * serviceaccounts/token and authentication.k8s.io/tokenreviews (cluster-admin on a throwaway
 * kind cluster is the simplest). The pod need not run: a pod-bound TokenRequest works for a
 * Pending pod, so no image is pulled (its node selector matches no node).
 */
import { randomBytes } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import {
  BootstrapCredentialKind,
  ExchangeTokenRequestSchema,
  LeoflowTokenScope,
} from '@leoflow/protocol';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkExchangeBoot } from '../../../packages/server/src/boot/exchange-boot.js';
import {
  EXCHANGE_AUDIENCE,
  kubeExchangeClient,
} from '../../../packages/server/src/executor/kubernetes/exchange/kube-token-review.js';
import {
  createTokenExchange,
  ExchangeRefused,
  type ExchangeRefusal,
} from '../../../packages/server/src/executor/kubernetes/exchange/token-exchange.js';
import {
  IDENTITY_ANNOTATION,
  podName,
} from '../../../packages/server/src/executor/kubernetes/labels.js';

const KUBECONFIG = process.env['KUBECONFIG'];
const title = KUBECONFIG
  ? `the token exchange on the cluster of KUBECONFIG=${KUBECONFIG}`
  : 'the token exchange on a real cluster — SKIPPED: KUBECONFIG is not set (point it at a kind or other throwaway cluster to run this)';
const SA = 'leoflow-task';
const ns = `leoflow-exchange-${randomBytes(3).toString('hex')}`;

describe.skipIf(!KUBECONFIG)(title, () => {
  const kc = new KubeConfig();
  let core: CoreV1Api;
  const tis = new Map<string, Record<string, unknown>>();
  const exchange = () =>
    createTokenExchange({
      kube: kubeExchangeClient(kc),
      store: {
        getTaskInstanceById: (id: string) => Promise.resolve(tis.get(id)),
        getRunById: (id: string) => Promise.resolve({ id, run_id: 'r' }),
      } as never,
      tokens: {
        ttlSeconds: 600,
        mint: (id: { task_instance_id: string }) => Promise.resolve(`tok-${id.task_instance_id}`),
      },
      clock: { now: () => Date.now() },
      logger: pino({ level: 'silent' }),
      tenantPlacement: () => ({ namespace: ns, serviceAccounts: [SA] }),
    });

  /** The attempt's pod under the executor's name for it, or under `name` (a forgery). */
  async function pod(ti: string, name = podName(ti, 1, 0, 'd', 'x')) {
    tis.set(ti, {
      id: ti,
      tenant_id: 't',
      dag_id: 'd',
      dag_run_id: 'dr',
      task_id: 'x',
      try_number: 1,
      dispatch_gen: 0,
      state: 'running',
    });
    const created = await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: {
          name,
          annotations: {
            [IDENTITY_ANNOTATION]: JSON.stringify({ ti, tenant: 't', try: 1, gen: 0 }),
          },
        },
        spec: {
          serviceAccountName: SA,
          automountServiceAccountToken: false,
          nodeSelector: { 'leoflow.io/no-such-node': 'true' },
          containers: [{ name: 'agent', image: 'registry.k8s.io/pause:3.9' }],
        },
      },
    });
    return { name, uid: created.metadata!.uid! };
  }
  async function token(name: string | null, uid: string | null, audiences = [EXCHANGE_AUDIENCE]) {
    const r = await core.createNamespacedServiceAccountToken({
      namespace: ns,
      name: SA,
      body: {
        spec: {
          audiences,
          expirationSeconds: 600,
          ...(name && uid ? { boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name, uid } } : {}),
        },
      },
    });
    return r.status!.token;
  }
  const req = (credential: string) =>
    create(ExchangeTokenRequestSchema, {
      kind: BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN,
      credential,
      protocolVersion: 1,
    });
  async function refusal(
    ex: ReturnType<typeof exchange>,
    credential: string,
  ): Promise<ExchangeRefusal> {
    try {
      await ex(req(credential));
    } catch (e) {
      if (e instanceof ExchangeRefused) return e.refusal;
      throw e;
    }
    throw new Error('not refused');
  }

  beforeAll(async () => {
    kc.loadFromDefault();
    core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: ns } } });
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: SA } } });
  }, 60_000);
  afterAll(async () => {
    await core?.deleteNamespace({ name: ns }).catch(() => undefined);
  });

  it('boot check passes (TokenReview permission via SelfSubjectAccessReview)', async () => {
    await expect(
      checkExchangeBoot({ kube: kubeExchangeClient(kc), channelMode: 'tls' }),
    ).resolves.toBeUndefined();
  });

  it('a live pod gets its attempt token once; the hostile cases are refused', async () => {
    const ex = exchange();
    const live = await pod('ti-live');
    const t = await token(live.name, live.uid);
    const res = await ex(req(t));
    expect([res.scope, res.token]).toEqual([LeoflowTokenScope.ATTEMPT, 'tok-ti-live']);
    expect(await refusal(ex, t)).toBe('replayed');
    const aud = await pod('ti-aud');
    expect(await refusal(ex, await token(aud.name, aud.uid, ['another-audience']))).toBe(
      'not_authenticated',
    );
    expect(await refusal(ex, await token(null, null))).toBe('not_a_pod');
    // a pod that copied a live attempt's annotation under a name of its own
    await pod('ti-copied');
    const forged = await pod('ti-copied', 'lf-forged');
    expect(await refusal(ex, await token(forged.name, forged.uid))).toBe('identity_mismatch');
    const gone = await pod('ti-gone');
    const t3 = await token(gone.name, gone.uid);
    await core.deleteNamespacedPod({ namespace: ns, name: gone.name, gracePeriodSeconds: 0 });
    // a real apiserver may still vouch for the token during the pod's deletion grace; the
    // exchange's own read-back of the pod refuses it either way
    await new Promise((r) => setTimeout(r, 2_000));
    expect(['not_authenticated', 'pod_gone']).toContain(await refusal(ex, t3));
    const done = await pod('ti-done');
    tis.get('ti-done')!.state = 'success';
    expect(await refusal(ex, await token(done.name, done.uid))).toBe('not_live');
  }, 120_000);
});
