/**
 * The token exchange against a REAL kube-apiserver: whatever KUBECONFIG points to (kind, GKE, …),
 * or, when KUBECONFIG is unset, Kubernetes' own kube-apiserver, etcd, controller manager and
 * scheduler started here (tools/kube-apiserver, `npm run kube:build`). Seed 001's owed e2e: a
 * pod-bound projected token for the control-plane audience is exchanged once (TokenReview, the
 * bound-pod extras, the pod's identity annotation, the attempt) and the hostile cases are refused:
 * a replay, another audience, a token bound to no pod, a forged pod name, a token that expired (an
 * hour ago: refused before any TokenReview; two minutes ago: by the apiserver), a deleted pod's, a
 * re-created pod's, a finished attempt's. A deleted pod's token may keep authenticating at the
 * apiserver for ~10 s (its authentication cache); the exchange's own read of the pod refuses it
 * at once.
 *
 * The kubeconfig's user must be able to create namespaces, service accounts, pods,
 * serviceaccounts/token and authentication.k8s.io/tokenreviews (cluster-admin on a throwaway
 * kind cluster is the simplest). The pod need not run: a pod-bound TokenRequest works for a
 * Pending pod, so no image is pulled (its node selector matches no node).
 */
import { createPrivateKey, randomBytes, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import {
  BootstrapCredentialKind,
  ExchangeTokenRequestSchema,
  LeoflowTokenScope,
} from '@leoflow/protocol';
import { realKubeWanted, startRealKube, type RealKube } from '@leoflow/kube-double';
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
const RUNS = KUBECONFIG !== undefined || realKubeWanted();
const title = KUBECONFIG
  ? `the token exchange on the cluster of KUBECONFIG=${KUBECONFIG}`
  : RUNS
    ? "the token exchange on Kubernetes' own kube-apiserver (v1.34, started here)"
    : 'the token exchange on a real apiserver — SKIPPED: KUBECONFIG is unset and the real kube-apiserver is not built (npm run kube:build)';
const SA = 'leoflow-task';
const ns = `leoflow-exchange-${randomBytes(3).toString('hex')}`;

describe.skipIf(!RUNS)(title, () => {
  const kc = new KubeConfig();
  let core: CoreV1Api;
  /** the local real apiserver (KUBECONFIG unset): its issuer key signs the expired tokens */
  let real: RealKube | undefined;
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
    if (KUBECONFIG) kc.loadFromDefault();
    else {
      real = await startRealKube({ prefix: 'leoflow-real-cluster-' });
      kc.loadFromFile(real.kubeconfig(real.dir));
    }
    core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: ns } } });
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: SA } } });
  }, 60_000);
  afterAll(async () => {
    await core?.deleteNamespace({ name: ns }).catch(() => undefined);
    await real?.close();
  });

  /** The same claims with another lifetime, signed with the issuer's key (local apiserver only). */
  function reissued(token: string, iat: number, exp: number): string {
    const [header, payload] = token.split('.') as [string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<
      string,
      unknown
    >;
    const body = Buffer.from(JSON.stringify({ ...claims, iat, nbf: iat, exp })).toString(
      'base64url',
    );
    const key = createPrivateKey(readFileSync(join(real!.dir, 'sa.key'), 'utf8'));
    return `${header}.${body}.${sign('sha256', Buffer.from(`${header}.${body}`), key).toString('base64url')}`;
  }
  const review = async (token: string) =>
    kubeExchangeClient(kc).reviewToken(token, [EXCHANGE_AUDIENCE]);

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
    // vouched for while the pod lives (and, on a real apiserver, cached as such for ~10 s)
    expect((await review(t3)).authenticated).toBe(true);
    await core.deleteNamespacedPod({ namespace: ns, name: gone.name, gracePeriodSeconds: 0 });
    // The apiserver may still vouch for the token for ~10 s (its authentication cache); the
    // exchange's own read of the pod refuses it at once either way.
    expect(['not_authenticated', 'pod_gone']).toContain(await refusal(ex, t3));
    const deletedAt = Date.now();
    for (;;) {
      const r = await review(t3);
      if (!r.authenticated) {
        expect(r.detail).toBe('[invalid bearer token, service account token has been invalidated]');
        break;
      }
      expect(Date.now() - deletedAt, 'the apiserver vouched past its ~10 s cache').toBeLessThan(
        20_000,
      );
      await new Promise((r) => setTimeout(r, 250));
    }
    // a pod re-created under the deleted one's name: the old token names the old uid
    const reborn = await pod('ti-gone');
    expect(reborn.uid).not.toBe(gone.uid);
    expect(['identity_mismatch', 'not_authenticated']).toContain(await refusal(exchange(), t3));
    expect((await review(t3)).authenticated).toBe(false);
    const done = await pod('ti-done');
    tis.get('ti-done')!.state = 'success';
    expect(await refusal(ex, await token(done.name, done.uid))).toBe('not_live');
  }, 120_000);

  it.skipIf(KUBECONFIG !== undefined)(
    'an expired token is refused: an hour ago before any TokenReview, two minutes ago by the apiserver',
    async () => {
      const live = await pod('ti-expiring');
      const t = await token(live.name, live.uid);
      const now = Math.floor(Date.now() / 1000);
      // the same claims, re-signed as the issuer, not expired: the exchange takes it (so the
      // refusals below are the expiry)
      const fresh = reissued(t, now - 60, now + 540);
      const hourAgo = reissued(t, now - 4200, now - 3600);
      const minutesAgo = reissued(t, now - 720, now - 120);
      expect(await refusal(exchange(), hourAgo)).toBe('not_authenticated');
      expect(await refusal(exchange(), minutesAgo)).toBe('not_authenticated');
      expect(await review(minutesAgo)).toEqual({
        authenticated: false,
        detail: '[invalid bearer token, service account token has expired]',
      });
      const res = await exchange()(req(fresh));
      expect(res.token).toBe('tok-ti-expiring');
    },
    60_000,
  );
});
