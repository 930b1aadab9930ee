import { describe, expect, it } from 'vitest';
import {
  checkKubernetesAllowed,
  dagSpecHash,
  parseQuantity,
  resolveKubernetesChoices,
  validateDagSpec,
  type KubernetesAllowlist,
} from '@leoflow/core';
import { compileText, expectOk } from './helpers.js';

const allowlist: KubernetesAllowlist = {
  images: ['registry.example/leoflow-agent:1', 'registry.example/leoflow-agent-py:1'],
  serviceAccounts: ['leoflow-task', 'etl-reader'],
  maxResources: { cpu: '2', memory: '1Gi' },
  defaultResources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
};

const yaml = (kube: string) =>
  `tasks:\n  - task_id: a\n    command: echo a\n    executor: kubernetes\n    kubernetes:\n${kube}`;

describe('kubernetes: authoring keys', () => {
  it('compiles image, service_account and resources onto the task, and validates as dag.json', () => {
    const spec = expectOk(
      compileText(
        yaml(
          '      image: registry.example/leoflow-agent-py:1\n      service_account: etl-reader\n      resources:\n        requests: {cpu: 500m}\n        limits: {cpu: "1", memory: 512Mi}\n',
        ),
      ),
    ).spec;
    expect(spec.tasks[0]!.executor).toBe('kubernetes');
    expect(spec.tasks[0]!.kubernetes).toEqual({
      image: 'registry.example/leoflow-agent-py:1',
      service_account: 'etl-reader',
      resources: { requests: { cpu: '500m' }, limits: { cpu: '1', memory: '512Mi' } },
    });
    expect(validateDagSpec(JSON.parse(JSON.stringify(spec))).ok).toBe(true);
  });

  it('a task without the keys compiles without them (existing DAGs keep their hash)', () => {
    const spec = expectOk(compileText('tasks:\n  - task_id: a\n    command: echo a\n')).spec;
    expect('kubernetes' in spec.tasks[0]!).toBe(false);
    expect('executor' in spec.tasks[0]!).toBe(false);
    expect(dagSpecHash(spec)).toBe(dagSpecHash(JSON.parse(JSON.stringify(spec))));
  });

  it.each([
    ['      namespace: kube-system\n', 'tasks[0].kubernetes.namespace'],
    ['      service_account: Admin_SA\n', 'tasks[0].kubernetes.service_account'],
    ['      resources:\n        limits: {cpu: lots}\n', 'tasks[0].kubernetes.resources.limits.cpu'],
    ['      resources:\n        limits: {gpu: "1"}\n', 'tasks[0].kubernetes.resources.limits.gpu'],
    [
      '      resources:\n        requests: {memory: 2Gi}\n        limits: {memory: 1Gi}\n',
      'tasks[0].kubernetes.resources.requests.memory',
    ],
  ])('refuses %j at %s with LF_DAG_KUBERNETES and a position', (kube, path) => {
    const r = compileText(yaml(kube));
    expect(r.ok).toBe(false);
    const errors = r.ok ? [] : r.errors;
    const e = errors.find((x) => x.path === path);
    expect(e?.code).toBe('LF_DAG_KUBERNETES');
    expect(e!.line).toBeGreaterThan(4);
  });

  it('dag.json with a key outside the schema is refused', () => {
    const spec = expectOk(compileText(yaml('      image: x\n'))).spec as unknown as {
      tasks: Record<string, unknown>[];
    };
    spec.tasks[0]!.kubernetes = { image: 'x', host_network: true };
    expect(validateDagSpec(spec).ok).toBe(false);
  });
});

describe('the tenant allowlist', () => {
  it('accepts choices within it', () => {
    expect(
      checkKubernetesAllowed(
        {
          image: 'registry.example/leoflow-agent-py:1',
          service_account: 'etl-reader',
          resources: { limits: { cpu: '2', memory: '1024Mi' } },
        },
        allowlist,
        'k',
      ),
    ).toEqual([]);
  });

  it('refuses a service account, an image and resources outside it (the confused deputy)', () => {
    const issues = checkKubernetesAllowed(
      {
        image: 'docker.io/evil:latest',
        service_account: 'cluster-admin',
        resources: {
          requests: { cpu: '2001m' },
          limits: { memory: '1.5Gi', 'ephemeral-storage': '1Gi' },
        },
      },
      allowlist,
      'k',
    );
    expect(issues.map((i) => i.path).sort()).toEqual([
      'k.image',
      'k.resources.limits.memory',
      'k.resources.limits["ephemeral-storage"]',
      'k.resources.requests.cpu',
      'k.service_account',
    ]);
    expect(issues.find((i) => i.path === 'k.service_account')!.hint).toContain('leoflow-task');
  });

  it('resolves defaults: the first image and service account, the default resources', () => {
    expect(resolveKubernetesChoices(undefined, allowlist)).toEqual({
      image: 'registry.example/leoflow-agent:1',
      serviceAccount: 'leoflow-task',
      resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
    });
    // A task's lower limit lowers a default request above it instead of making an invalid pod.
    expect(
      resolveKubernetesChoices({ resources: { limits: { cpu: '50m' } } }, allowlist).resources,
    ).toEqual({ requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: '50m' } });
  });

  it('resolving a choice outside the allowlist throws (the allowlist shrank since registration)', () => {
    expect(() => resolveKubernetesChoices({ service_account: 'root' }, allowlist)).toThrow(
      /service account "root" is not on/,
    );
  });

  it.each([
    ['1', 1],
    ['500m', 0.5],
    ['128Mi', 128 * 2 ** 20],
    ['1G', 1e9],
    ['1e3', 1000],
    ['.5', 0.5],
    ['1.5Gi', 1.5 * 2 ** 30],
  ])('parses quantity %s', (q, v) => expect(parseQuantity(q)).toBe(v));
  it.each(['', 'lots', '1 Gi', '1gi', 'Mi'])('refuses quantity %j', (q) =>
    expect(parseQuantity(q)).toBeUndefined(),
  );
});
