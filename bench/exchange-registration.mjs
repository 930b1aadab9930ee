// exchange_registration: what the exchange transport adds to an attempt's registration, through
// the kube-apiserver double (HTTPS, @kubernetes/client-node): envvar mints the attempt token at
// pod create (one Ed25519 signature); exchange does one TokenReview + one pod read + the same
// mint, when the agent calls ExchangeToken. Both are timed in this process, the same run, on the
// built server (packages/server/dist); TokenReviews per pod come from the exchange's own counter.
// The pods' projected tokens are requested before timing (the kubelet's work, not the control
// plane's). The double answers from this process too, so the figures include its own CPU.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { create } from '@bufbuild/protobuf';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { BootstrapCredentialKind, ExchangeTokenRequestSchema } from '@leoflow/protocol';
import { pino } from 'pino';
import { startKubeDouble, ADMIN_USER } from '../packages/kube-double/dist/index.js';
import { AgentTokenIssuer } from '../packages/server/dist/auth/agent-token.js';
import { loadSigningKeyring } from '../packages/server/dist/auth/signing-keys.js';
import { kubeExchangeClient } from '../packages/server/dist/executor/kubernetes/exchange/kube-token-review.js';
import { createTokenExchange } from '../packages/server/dist/executor/kubernetes/exchange/token-exchange.js';
import {
  IDENTITY_ANNOTATION,
  podName,
} from '../packages/server/dist/executor/kubernetes/labels.js';
import { log, onCleanup, ratio, summary } from './lib.mjs';

export const description =
  'attempt registration credential cost: envvar (mint at pod create) vs exchange (TokenReview + pod read + mint) through the apiserver double; TokenReviews per pod';

const NS = 'leoflow-bench-exchange';
const SA = 'leoflow-task';

export async function run({ quick }) {
  const pods = quick ? 5 : 200;
  const dir = mkdtempSync(join(tmpdir(), 'leoflow-bench-exchange-'));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const double = await startKubeDouble();
  onCleanup(() => double.close());
  const admin = double.api.context(ADMIN_USER);
  double.api.createObject(
    double.api.type('', 'namespaces'),
    undefined,
    { metadata: { name: NS } },
    admin,
  );
  double.api.createObject(
    double.api.type('', 'serviceaccounts'),
    NS,
    { metadata: { name: SA } },
    admin,
  );
  const kc = new KubeConfig();
  kc.loadFromFile(double.kubeconfig(dir));
  const core = kc.makeApiClient(CoreV1Api);
  const keys = await loadSigningKeyring(join(dir, 'data'), 'agent', { retainSeconds: 3600 });
  const tokens = new AgentTokenIssuer(keys, 600);
  const tis = new Map();
  let reviews = 0;
  const exchange = createTokenExchange({
    kube: kubeExchangeClient(kc),
    store: {
      getTaskInstanceById: (id) => Promise.resolve(tis.get(id)),
      getRunById: (id) => Promise.resolve({ id, run_id: `run-${id}` }),
    },
    tokens,
    clock: { now: () => Date.now() },
    logger: pino({ level: 'silent' }),
    tenantPlacement: () => ({ namespace: NS, serviceAccounts: [SA] }),
    metrics: { tokenReviewed: () => void (reviews += 1), exchanged: () => undefined },
  });

  log(`exchange_registration: ${pods} pods, projected tokens requested first`);
  const credentials = [];
  for (let i = 0; i < pods; i++) {
    const ti = `ti-${i}`;
    tis.set(ti, {
      id: ti,
      tenant_id: 't',
      dag_id: 'd',
      dag_run_id: `dr-${i}`,
      task_id: 'x',
      try_number: 1,
      dispatch_gen: 0,
      state: 'running',
    });
    // the name the executor gives the attempt's pod: the only one the exchange accepts for it
    const name = podName(ti, 1, 0, 'd', 'x');
    const pod = double.api.createObject(
      double.api.type('', 'pods'),
      NS,
      {
        metadata: {
          name,
          annotations: {
            [IDENTITY_ANNOTATION]: JSON.stringify({ ti, tenant: 't', try: 1, gen: 0 }),
          },
        },
        spec: {
          serviceAccountName: SA,
          automountServiceAccountToken: false,
          containers: [{ name: 'agent', image: 'agent' }],
        },
      },
      admin,
    );
    const r = await core.createNamespacedServiceAccountToken({
      namespace: NS,
      name: SA,
      body: {
        spec: {
          audiences: ['leoflow-control-plane'],
          expirationSeconds: 600,
          boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name, uid: pod.metadata.uid },
        },
      },
    });
    credentials.push(r.status.token);
  }

  const envvarMs = [];
  for (let i = 0; i < pods; i++) {
    const t0 = performance.now();
    await tokens.mint(
      {
        tenant_id: 't',
        dag_id: 'd',
        dag_run_id: `dr-${i}`,
        run_id: 'r',
        task_id: 'x',
        try_number: 1,
        task_instance_id: `ti-${i}`,
        dispatch_gen: 0,
      },
      Date.now(),
    );
    envvarMs.push(performance.now() - t0);
  }
  const exchangeMs = [];
  for (const credential of credentials) {
    const t0 = performance.now();
    await exchange(
      create(ExchangeTokenRequestSchema, {
        kind: BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN,
        credential,
        protocolVersion: 1,
      }),
    );
    exchangeMs.push(performance.now() - t0);
  }
  const envvar = summary(envvarMs, 3);
  const exch = summary(exchangeMs, 3);
  return {
    pods,
    envvar_mint_ms: envvar,
    exchange_ms: exch,
    exchange_over_envvar_p50: ratio(exch.p50, envvar.p50),
    token_reviews_per_pod: ratio(reviews, pods),
  };
}
