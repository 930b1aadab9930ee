import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { KubernetesAllowlist, TaskSpecDef } from '@leoflow/core';
import type { AttemptIdentity } from '../../../src/auth/agent-token.js';
import {
  IDENTITY_ANNOTATION,
  LABEL,
  labelValue,
  podName,
} from '../../../src/executor/kubernetes/labels.js';
import {
  buildAttemptPod,
  type PodBuildInput,
} from '../../../src/executor/kubernetes/pod-builder.js';
import {
  AGENT_TOKEN_ENV,
  envvarTransport,
} from '../../../src/executor/kubernetes/token-transport.js';
import { restrictedViolations } from '../../support/pod-security.js';
import { task } from '../../support/spec-builders.js';

const allowlist: KubernetesAllowlist = {
  images: ['registry.example/leoflow-agent:1', 'registry.example/leoflow-agent-py:1'],
  serviceAccounts: ['leoflow-task', 'etl-reader'],
  maxResources: { cpu: '2', memory: '1Gi' },
  defaultResources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
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

function input(over: Partial<PodBuildInput> = {}, t: Partial<TaskSpecDef> = {}): PodBuildInput {
  return {
    identity,
    token: 'tok',
    transport: envvarTransport,
    agentUrl: 'https://leoflow-agent.leoflow.svc:8793',
    heartbeatIntervalMs: 15_000,
    task: task('extract', t),
    placement: { namespace: 'leoflow-acme', allowlist },
    instance: 'leoflow',
    executorName: 'kubernetes',
    runAsUser: 65532,
    podStartTimeoutMs: 300_000,
    terminationGracePeriodSeconds: 30,
    agentCa: { configMap: 'leoflow-agent-ca', key: 'ca.crt' },
    ...over,
  };
}

const envOf = (pod: ReturnType<typeof buildAttemptPod>) =>
  Object.fromEntries(pod.spec!.containers[0]!.env!.map((e) => [e.name, e.value]));

describe('the attempt pod', () => {
  it("runs in the tenant's namespace with the tenant's default service account, image and resources", () => {
    const pod = buildAttemptPod(input());
    expect(pod.metadata!.namespace).toBe('leoflow-acme');
    expect(pod.spec!.serviceAccountName).toBe('leoflow-task');
    expect(pod.spec!.containers[0]!.image).toBe('registry.example/leoflow-agent:1');
    expect(pod.spec!.containers[0]!.resources).toEqual({
      requests: { cpu: '100m', memory: '128Mi' },
      limits: { memory: '256Mi' },
    });
    expect(pod.spec!.restartPolicy).toBe('Never');
    expect(pod.spec!.automountServiceAccountToken).toBe(false);
  });

  it('takes the task’s choices within the allowlist, and refuses one outside it', () => {
    const pod = buildAttemptPod(
      input(
        {},
        {
          kubernetes: {
            image: 'registry.example/leoflow-agent-py:1',
            service_account: 'etl-reader',
            resources: { limits: { cpu: '2', memory: '1Gi' } },
          },
        },
      ),
    );
    expect(pod.spec!.serviceAccountName).toBe('etl-reader');
    expect(pod.spec!.containers[0]!.image).toBe('registry.example/leoflow-agent-py:1');
    expect(pod.spec!.containers[0]!.resources!.limits).toEqual({ cpu: '2', memory: '1Gi' });
    // The confused deputy: a DAG naming a more privileged service account gets no pod.
    expect(() =>
      buildAttemptPod(input({}, { kubernetes: { service_account: 'cluster-admin' } })),
    ).toThrow(/not on this tenant's allowlist/);
    expect(() =>
      buildAttemptPod(input({}, { kubernetes: { resources: { limits: { memory: '2Gi' } } } })),
    ).toThrow(/above this tenant's ceiling/);
  });

  it('passes Pod Security Admission restricted: non-root, no escalation, no capabilities, RuntimeDefault seccomp, read-only root with writable emptyDirs, no host paths', () => {
    const pod = buildAttemptPod(input());
    expect(restrictedViolations(pod.spec as unknown as Record<string, unknown>)).toEqual([]);
    const c = pod.spec!.containers[0]!;
    expect(c.securityContext!.readOnlyRootFilesystem).toBe(true);
    expect(pod.spec!.volumes!.filter((v) => v.emptyDir).map((v) => v.name)).toEqual([
      'work',
      'tmp',
    ]);
    expect(c.volumeMounts!.map((m) => m.mountPath)).toEqual(['/work', '/tmp', '/etc/leoflow/tls']);
    expect(JSON.stringify(pod)).not.toContain('hostPath');
    expect(pod.spec!.enableServiceLinks).toBe(false);
  });

  it('activeDeadlineSeconds covers the execution timeout, the pod start allowance and the grace; none without a timeout', () => {
    expect(
      buildAttemptPod(input({}, { execution_timeout_seconds: 60 })).spec!.activeDeadlineSeconds,
    ).toBe(60 + 300 + 30);
    expect(buildAttemptPod(input()).spec!.activeDeadlineSeconds).toBeUndefined();
  });

  it('labels tenant, dag, run, task and try with valid label values, and annotates the exact identity', () => {
    const odd: AttemptIdentity = {
      ...identity,
      tenant_id: 'Team Ω',
      dag_id: 'a'.repeat(200),
      run_id: 'scheduled__2026-01-01T00:00:00+00:00',
      task_id: '.hidden_',
      try_number: 3,
    };
    const pod = buildAttemptPod(input({ identity: odd }));
    const labels = pod.metadata!.labels!;
    for (const v of Object.values(labels)) {
      expect(v.length).toBeLessThanOrEqual(63);
      expect(v).toMatch(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/);
    }
    expect(labels[LABEL.try]).toBe('3');
    expect(labels[LABEL.tenant]).not.toBe(labelValue('Team Ω!'));
    expect(JSON.parse(pod.metadata!.annotations![IDENTITY_ANNOTATION]!)).toEqual({
      ti: odd.task_instance_id,
      tenant: 'Team Ω',
      dag: 'a'.repeat(200),
      run: 'scheduled__2026-01-01T00:00:00+00:00',
      task: '.hidden_',
      try: 3,
      gen: 1,
    });
    expect(pod.metadata!.name!.length).toBeLessThanOrEqual(63);
    expect(pod.metadata!.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  });

  it('a valid label value is kept; values that differ only in what a label cannot hold stay apart', () => {
    expect(labelValue('etl_daily.v2')).toBe('etl_daily.v2');
    expect(labelValue('a b')).not.toBe(labelValue('a_b'));
    expect(labelValue('a/b')).not.toBe(labelValue('a:b'));
    expect(labelValue('x'.repeat(64))).not.toBe(labelValue('x'.repeat(65)));
    expect(labelValue('---')).toMatch(/^[0-9a-f]{10}$/);
  });

  it('the pod name is per dispatch: a new try or generation is a new pod, the same dispatch the same name', () => {
    const a = podName('ti', 1, 1, 'etl', 'extract');
    expect(podName('ti', 1, 1, 'etl', 'extract')).toBe(a);
    expect(podName('ti', 1, 2, 'etl', 'extract')).not.toBe(a);
    expect(podName('ti', 2, 1, 'etl', 'extract')).not.toBe(a);
  });

  it('drops LEOFLOW_* operator env (any case) and platform keys win; the task’s own env is not on the pod', () => {
    const pod = buildAttemptPod(
      input(
        {
          extraEnv: {
            HTTPS_PROXY: 'http://proxy:3128',
            leoflow_agent_url: 'https://evil.example',
            LEOFLOW_AGENT_TOKEN: 'spoofed',
            HOME: '/root',
          },
        },
        { env: { APP_MODE: 'author-value', LEOFLOW_AGENT_TOKEN_PATH: '/evil' } },
      ),
    );
    const env = pod.spec!.containers[0]!.env!;
    expect(env.filter((e) => e.name.toUpperCase() === 'LEOFLOW_AGENT_URL')).toEqual([
      { name: 'LEOFLOW_AGENT_URL', value: 'https://leoflow-agent.leoflow.svc:8793' },
    ]);
    expect(env.filter((e) => e.name === AGENT_TOKEN_ENV)).toEqual([
      { name: AGENT_TOKEN_ENV, value: 'tok' },
    ]);
    expect(envOf(pod).HOME).toBe('/work');
    expect(envOf(pod).HTTPS_PROXY).toBe('http://proxy:3128');
    const text = JSON.stringify(pod);
    for (const s of ['evil', 'spoofed', 'author-value', 'LEOFLOW_AGENT_TOKEN_PATH'])
      expect(text).not.toContain(s);
  });
});

describe('what credential a pod holds (envvar transport)', () => {
  const CANARIES = {
    vaultKey: 'canary-vault-key-7b1f2e',
    signingSecret: 'canary-signing-secret-91cd',
    connectionUri: 'postgres://canary_user:canary-conn-pass-44aa@db:5432/x',
    variable: 'canary-variable-value-5e3c',
    authorEnv: 'canary-author-env-c0ffee',
  };
  beforeEach(() => {
    // The control plane's own secrets in its environment: a builder that read process.env (or
    // copied it, as an os.Environ() append would) would carry them onto the pod.
    vi.stubEnv('LEOFLOW_SECRET_KEY', CANARIES.vaultKey);
    vi.stubEnv('LEOFLOW_AUTH_JWT_SECRET', CANARIES.signingSecret);
    vi.stubEnv('AIRFLOW_CONN_WAREHOUSE', CANARIES.connectionUri);
    vi.stubEnv('AIRFLOW_VAR_GREETING', CANARIES.variable);
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('every pod built holds exactly one credential: its own attempt token, once, as the LEOFLOW_AGENT_TOKEN env value', () => {
    const pods = [];
    const tokens: string[] = [];
    let n = 0;
    for (const tryNumber of [1, 2, 7]) {
      for (const t of [
        task('extract', {
          env: { SECRET_LOOKING: CANARIES.authorEnv },
          connections: ['warehouse'],
          variables: ['greeting'],
        }),
        task('load', {
          execution_timeout_seconds: 5,
          kubernetes: {
            image: 'registry.example/leoflow-agent-py:1',
            service_account: 'etl-reader',
          },
        }),
      ]) {
        const token = `eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ0aS0${++n}In0.c2lnbmF0dXJlLSR7bn0tYXR0ZW1wdA${n}`;
        tokens.push(token);
        pods.push({
          token,
          text: JSON.stringify(
            buildAttemptPod(
              input(
                {
                  token,
                  identity: { ...identity, task_id: t.task_id, try_number: tryNumber },
                  extraEnv: { TZ: 'UTC' },
                },
                t,
              ),
            ),
          ),
        });
      }
    }
    for (const { token, text } of pods) {
      const pod = JSON.parse(text) as ReturnType<typeof buildAttemptPod>;
      // Exactly once, and exactly where the transport says.
      expect(text.split(token).length - 1).toBe(1);
      expect(pod.spec!.containers[0]!.env!.find((e) => e.value === token)?.name).toBe(
        AGENT_TOKEN_ENV,
      );
      // No other attempt's token.
      for (const other of tokens) if (other !== token) expect(text).not.toContain(other);
      // No other secret: nothing the control plane holds, nothing the task declared or set.
      for (const canary of Object.values(CANARIES)) expect(text).not.toContain(canary);
      expect(text).not.toContain('canary');
      // No secretKeyRef / valueFrom: the only credential is the literal the transport set.
      expect(text).not.toMatch(/secretKeyRef|valueFrom|"secret":/);
      // Nothing JWT-shaped besides the token (a second credential would look like one).
      expect(text.match(/eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/g)).toEqual([token]);
    }
  });
});
