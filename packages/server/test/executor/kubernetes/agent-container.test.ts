/**
 * Attempt pods and warm-pool pods are built around one locked-down agent container
 * (agent-container.ts, agent-pod.ts): what they share is pinned here against both builders, so a
 * builder that drifts from the other (its own securityContext, a missing lock) turns this red.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { V1Pod } from '@kubernetes/client-node';
import type { KubernetesAllowlist } from '@leoflow/core';
import type { AttemptIdentity } from '../../../src/auth/agent-token.js';
import {
  BOOTSTRAP_SECRET_KEY,
  EXCHANGE_BOOTSTRAP_ENV,
  bootstrapSecretName,
} from '../../../src/executor/kubernetes/exchange/bootstrap-secret.js';
import { WORKER_POOL_ANNOTATION } from '../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import { IDENTITY_ANNOTATION } from '../../../src/executor/kubernetes/labels.js';
import {
  buildAttemptPod,
  type PodBuildInput,
} from '../../../src/executor/kubernetes/pod-builder.js';
import {
  ATTEMPT_UID_CAPABILITIES,
  buildPoolPod,
  type PoolPodBuildInput,
} from '../../../src/executor/kubernetes/pool-pod-builder.js';
import { EXCHANGE_TOKEN_VOLUME } from '../../../src/executor/kubernetes/projected-token.js';
import {
  envvarTransport,
  exchangeTransport,
  secretKeyRefExchangeTransport,
} from '../../../src/executor/kubernetes/token-transport.js';
import { task } from '../../support/spec-builders.js';

const allowlist: KubernetesAllowlist = {
  images: ['registry.example/leoflow-agent:1'],
  serviceAccounts: ['leoflow-task'],
  maxResources: { cpu: '2', memory: '1Gi' },
  defaultResources: { requests: { cpu: '100m' }, limits: { memory: '256Mi' } },
};

const identity: AttemptIdentity = {
  tenant_id: 'acme',
  dag_id: 'etl',
  dag_run_id: 'dr-1',
  run_id: 'manual__2026-01-01T00:00:00.000Z',
  task_id: 'extract',
  try_number: 1,
  task_instance_id: '9f0c3a52-7d1e-4b8a-9c55-0b6f2f1d7e21',
  dispatch_gen: 1,
};

const agentCa = { configMap: 'leoflow-agent-ca', key: 'ca.crt' };

function attempt(over: Partial<PodBuildInput> = {}): V1Pod {
  return buildAttemptPod({
    identity,
    token: 'tok',
    transport: envvarTransport,
    agentUrl: 'https://leoflow-agent.leoflow.svc:8793',
    heartbeatIntervalMs: 15_000,
    task: task('extract'),
    placement: { namespace: 'leoflow-acme', allowlist },
    instance: 'leoflow',
    executorName: 'kubernetes',
    runAsUser: 65532,
    podStartTimeoutMs: 300_000,
    terminationGracePeriodSeconds: 30,
    agentCa,
    ...over,
  });
}

function poolPod(over: Partial<PoolPodBuildInput> = {}, attemptUids?: boolean): V1Pod {
  return buildPoolPod({
    name: 'leoflow-worker-abc',
    pool: {
      tenant: 'acme',
      namespace: 'leoflow-acme',
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
    agentCa,
    ...over,
  });
}

const RESTRICTED_CONTAINER = {
  runAsNonRoot: true,
  runAsUser: 65532,
  runAsGroup: 65532,
  allowPrivilegeEscalation: false,
  privileged: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/** The pod spec without what is the builder's own (who runs, what, and for how long). */
function sharedSpec(pod: V1Pod) {
  const { containers, volumes, activeDeadlineSeconds, ...rest } = pod.spec!;
  void activeDeadlineSeconds;
  const c = containers[0]!;
  return {
    ...rest,
    container: {
      name: c.name,
      imagePullPolicy: c.imagePullPolicy,
      terminationMessagePolicy: c.terminationMessagePolicy,
      securityContext: c.securityContext,
    },
    volumes: (volumes ?? []).map((v) => JSON.stringify(v)).sort(),
    mounts: (c.volumeMounts ?? []).map((m) => JSON.stringify(m)).sort(),
  };
}

describe('one locked-down agent container for attempt pods and warm-pool pods', () => {
  it('restricted: an attempt pod and a pool pod with attempt_uids off share the container and pod securityContext, the pod settings and the volumes', () => {
    const a = attempt({ transport: exchangeTransport() });
    const p = poolPod({}, false);
    expect(a.spec!.containers[0]!.securityContext).toEqual(RESTRICTED_CONTAINER);
    expect(a.spec!.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      fsGroup: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    // the same keys in the same order too: one object shape, not two that happen to agree
    expect(JSON.stringify(sharedSpec(p))).toBe(JSON.stringify(sharedSpec(a)));
  });

  it('attempt_uids on: the pool pod differs only in who runs — uid 0 with the attempt-uid capabilities, the pod setting seccomp alone', () => {
    const p = poolPod();
    expect(p.spec!.containers[0]!.securityContext).toEqual({
      ...RESTRICTED_CONTAINER,
      runAsNonRoot: false,
      runAsUser: 0,
      runAsGroup: 0,
      capabilities: { drop: ['ALL'], add: [...ATTEMPT_UID_CAPABILITIES] },
    });
    expect(p.spec!.securityContext).toEqual({ seccompProfile: { type: 'RuntimeDefault' } });
    const { securityContext: rootSc, ...rootRest } = sharedSpec(p);
    const { securityContext: restrictedSc, ...restrictedRest } = sharedSpec(poolPod({}, false));
    expect(rootSc).not.toEqual(restrictedSc);
    expect(rootRest).toEqual({
      ...restrictedRest,
      container: {
        ...restrictedRest.container,
        securityContext: p.spec!.containers[0]!.securityContext,
      },
    });
  });

  it('the projected token, on an attempt pod (exchange) and a pool pod alike: read-only, mode 0400, expirationSeconds floored at 600', () => {
    for (const [asked, expected] of [
      [60, 600],
      [600, 600],
      [3600, 3600],
    ] as const) {
      for (const pod of [
        attempt({ transport: exchangeTransport(asked) }),
        poolPod({ projectedTokenSeconds: asked }),
        poolPod({ projectedTokenSeconds: asked }, false),
      ]) {
        const volume = pod.spec!.volumes!.find((v) => v.name === EXCHANGE_TOKEN_VOLUME);
        expect(volume?.projected).toEqual({
          defaultMode: 0o400,
          sources: [
            {
              serviceAccountToken: {
                audience: 'leoflow-control-plane',
                expirationSeconds: expected,
                path: 'token',
              },
            },
          ],
        });
        const mounts = pod.spec!.containers[0]!.volumeMounts!;
        expect(mounts.filter((m) => m.name === EXCHANGE_TOKEN_VOLUME)).toEqual([
          {
            name: EXCHANGE_TOKEN_VOLUME,
            mountPath: '/var/run/secrets/leoflow.io/exchange',
            readOnly: true,
          },
        ]);
      }
    }
  });

  describe('no credential on the Pod object (exchange transports and pool pods)', () => {
    const CANARIES = {
      LEOFLOW_SECRET_KEY: 'canary-vault-key-7b1f2e',
      LEOFLOW_AUTH_JWT_SECRET: 'canary-signing-secret-91cd',
      LEOFLOW_AGENT_TOKEN: 'canary-agent-token-0d0d',
      AIRFLOW_CONN_WAREHOUSE: 'postgres://canary_user:canary-conn-pass-44aa@db:5432/x',
    };
    beforeEach(() => {
      // The control plane's own secrets in its environment: a shared builder that read
      // process.env would carry them onto every kind of pod.
      for (const [k, v] of Object.entries(CANARIES)) vi.stubEnv(k, v);
    });
    afterEach(() => {
      vi.unstubAllEnvs();
    });

    it('env holds settings and paths only (a secretKeyRef to its own bootstrap Secret at most), no args or command, annotations name the identity or the pool', () => {
      const pods = [
        attempt({ transport: exchangeTransport(), token: 'canary-minted-token' }),
        attempt({ transport: secretKeyRefExchangeTransport, token: 'canary-minted-token' }),
        attempt({ transport: exchangeTransport(), agentCa: null }),
        poolPod(),
        poolPod({}, false),
        poolPod({ agentCa: null }),
      ];
      for (const pod of pods) {
        const text = JSON.stringify(pod);
        expect(text).not.toContain('canary');
        expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]+\./);
        const c = pod.spec!.containers[0]!;
        expect(c.args).toBeUndefined();
        expect(c.command).toBeUndefined();
        expect(pod.spec!.automountServiceAccountToken).toBe(false);
        for (const e of c.env ?? []) {
          if (e.valueFrom !== undefined) {
            // the secret_key_ref bootstrap: a reference to the pod's own Secret, never a value
            expect(e).toEqual({
              name: EXCHANGE_BOOTSTRAP_ENV,
              valueFrom: {
                secretKeyRef: {
                  name: bootstrapSecretName(pod.metadata!.name!),
                  key: BOOTSTRAP_SECRET_KEY,
                },
              },
            });
            continue;
          }
          // a path, a URL, a number or a flag, or the attempt's own id: nothing token-shaped
          if (e.name === 'LEOFLOW_TASK_INSTANCE_ID')
            expect(e.value).toBe(identity.task_instance_id);
          else expect(e.value, e.name).toMatch(/^(\/[\w./-]*|https:\/\/[\w.:-]+|\d+)$/);
        }
        expect(Object.keys(pod.metadata!.annotations ?? {})).toEqual([
          pod.metadata!.name === 'leoflow-worker-abc'
            ? WORKER_POOL_ANNOTATION
            : IDENTITY_ANNOTATION,
        ]);
      }
    });
  });
});
