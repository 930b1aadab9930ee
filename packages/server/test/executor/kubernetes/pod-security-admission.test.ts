/**
 * Every pod the Kubernetes executor builds, submitted to the PodSecurity admission plugin — the
 * double's and Kubernetes' own (kube-apiserver with --enable-admission-plugins=PodSecurity) — in a
 * namespace enforcing `restricted` and one enforcing `baseline`: the attempt pod under each token
 * transport (envvar, exchange's projected token, the SecretKeyRef fallback), a task choosing its
 * image, service account and resources within the allowlist, and the warm-pool pod with attempt
 * uids off are admitted at `restricted`; the default warm-pool pod (root with the attempt-uid
 * capabilities, by design) is refused at `restricted`, naming its violations, and admitted at
 * `baseline`. pod-builder.test.ts checks the same specs against our own reading of the standard
 * (support/pod-security.ts); this checks them against the plugin.
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { KubernetesAllowlist, TaskSpecDef } from '@leoflow/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttemptIdentity } from '../../../src/auth/agent-token.js';
import {
  buildAttemptPod,
  type PodBuildInput,
} from '../../../src/executor/kubernetes/pod-builder.js';
import { buildPoolPod } from '../../../src/executor/kubernetes/pool-pod-builder.js';
import {
  envvarTransport,
  exchangeTransport,
  secretKeyRefExchangeTransport,
} from '../../../src/executor/kubernetes/token-transport.js';
import {
  API_SERVER_KINDS,
  startKubeTestCluster,
  type KubeTestCluster,
} from '../../support/kube-cluster.js';
import { task } from '../../support/spec-builders.js';

const RESTRICTED_NS = 'psa-restricted';
const BASELINE_NS = 'psa-baseline';

const allowlist: KubernetesAllowlist = {
  images: ['registry.example/leoflow-agent:1', 'registry.example/leoflow-agent-py:1'],
  serviceAccounts: ['leoflow-task', 'etl-reader'],
  maxResources: { cpu: '2', memory: '1Gi' },
  defaultResources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
};

let serial = 0;
function attemptPod(
  namespace: string,
  transport: PodBuildInput['transport'],
  kubernetes?: TaskSpecDef['kubernetes'],
): V1Pod {
  serial += 1;
  const identity: AttemptIdentity = {
    tenant_id: 'acme',
    dag_id: 'etl',
    dag_run_id: `dr-${serial}`,
    run_id: `manual__${serial}`,
    task_id: 'extract',
    try_number: 1,
    task_instance_id: `9f0c3a52-7d1e-4b8a-9c55-0b6f2f1d${String(serial).padStart(4, '0')}`,
    dispatch_gen: 1,
  };
  return buildAttemptPod({
    identity,
    token: 'eyJhbGciOiJIUzI1NiJ9.e30.c2ln',
    transport,
    agentUrl: 'https://leoflow-agent.leoflow.svc:8793',
    heartbeatIntervalMs: 15_000,
    task: task('extract', kubernetes ? { kubernetes } : {}),
    placement: { namespace, allowlist },
    instance: 'leoflow',
    executorName: 'kubernetes',
    runAsUser: 65532,
    podStartTimeoutMs: 300_000,
    terminationGracePeriodSeconds: 30,
    agentCa: { configMap: 'leoflow-agent-ca', key: 'ca.crt' },
  });
}

function poolPod(namespace: string, attemptUids?: boolean): V1Pod {
  serial += 1;
  return buildPoolPod({
    name: `leoflow-worker-psa-${serial}`,
    pool: {
      tenant: 'acme',
      namespace,
      serviceAccount: 'leoflow-task',
      image: 'registry.example/leoflow-agent:1',
      minIdle: 1,
      maxSize: 2,
      maxAttemptsPerWorker: 5,
      maxWorkerLifetimeMs: 3_600_000,
      idleTtlMs: 300_000,
      ...(attemptUids === undefined ? {} : { attemptUids }),
    },
    poolKey: 'wp-0123456789abcdef',
    agentUrl: 'https://leoflow-agent.leoflow.svc:8793',
    heartbeatIntervalMs: 15_000,
    instance: 'leoflow',
    runAsUser: 65532,
    terminationGracePeriodSeconds: 30,
    agentCa: null,
  });
}

describe.each(API_SERVER_KINDS)(
  'Pod Security admission (%s apiserver) of the pods the executor builds',
  (kind) => {
    let cluster: KubeTestCluster;

    beforeAll(async () => {
      cluster = await startKubeTestCluster({ kind, prefix: 'leoflow-psa-' });
      for (const [ns, level] of [
        [RESTRICTED_NS, 'restricted'],
        [BASELINE_NS, 'baseline'],
      ] as const) {
        const created = await cluster.api.request('POST', '/api/v1/namespaces', {
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name: ns, labels: { 'pod-security.kubernetes.io/enforce': level } },
        });
        expect(created.status).toBe(201);
        for (const sa of allowlist.serviceAccounts)
          await cluster.api.request('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, {
            apiVersion: 'v1',
            kind: 'ServiceAccount',
            metadata: { name: sa },
          });
      }
    }, 60_000);

    afterAll(async () => {
      await cluster?.stop();
    });

    const submit = (pod: V1Pod) =>
      cluster.api.request<{ message?: string; metadata?: { name?: string } }>(
        'POST',
        `/api/v1/namespaces/${pod.metadata!.namespace!}/pods`,
        pod,
      );

    it('admits the attempt pod at restricted under every token transport, and a task choosing within the allowlist', async () => {
      const pods = [
        attemptPod(RESTRICTED_NS, envvarTransport),
        attemptPod(RESTRICTED_NS, exchangeTransport()),
        attemptPod(RESTRICTED_NS, secretKeyRefExchangeTransport),
        attemptPod(RESTRICTED_NS, exchangeTransport(), {
          image: 'registry.example/leoflow-agent-py:1',
          service_account: 'etl-reader',
          resources: { requests: { cpu: '1', memory: '512Mi' }, limits: { memory: '1Gi' } },
        }),
      ];
      for (const pod of pods) {
        const reply = await submit(pod);
        expect([pod.metadata!.name, reply.status, reply.body.message]).toEqual([
          pod.metadata!.name,
          201,
          undefined,
        ]);
      }
    });

    it('admits the warm-pool pod with attempt uids off at restricted', async () => {
      const reply = await submit(poolPod(RESTRICTED_NS, false));
      expect([reply.status, reply.body.message]).toEqual([201, undefined]);
    });

    it('refuses the default warm-pool pod at restricted, naming its violations, and admits it at baseline', async () => {
      const refused = await submit(poolPod(RESTRICTED_NS));
      expect(refused.status).toBe(403);
      // the plugin's own words (the double's are checked against them here)
      expect(refused.body.message).toMatch(
        /^pods "leoflow-worker-psa-\d+" is forbidden: violates PodSecurity "restricted:latest": unrestricted capabilities \(container "agent" must not include "CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID" in securityContext\.capabilities\.add\), runAsNonRoot != true \(container "agent" must not set securityContext\.runAsNonRoot=false\), runAsUser=0 \(container "agent" must not set runAsUser=0\)$/,
      );
      const admitted = await submit(poolPod(BASELINE_NS));
      expect([admitted.status, admitted.body.message]).toEqual([201, undefined]);
    });
  },
);
