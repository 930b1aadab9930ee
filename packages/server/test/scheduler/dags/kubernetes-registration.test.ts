import { describe, expect, it } from 'vitest';
import { LeoflowError } from '@leoflow/core';
import type { KubernetesExecutorConfig } from '../../../src/config/server-config.js';
import { checkExecutorChoices } from '../../../src/scheduler/dags/registration.js';
import { executorPolicy } from '../../../src/executor/kubernetes/configured.js';
import { spec, task } from '../../support/spec-builders.js';

const kube: KubernetesExecutorConfig = {
  kubeconfig: null,
  agentImage: 'registry.example/leoflow-agent:1',
  agentUrl: null,
  podStartTimeoutMs: 300_000,
  instance: 'leoflow',
  runAsUser: 65532,
  terminationGracePeriodSeconds: 30,
  agentCaConfigMap: null,
  keepFinishedPods: false,
  tenants: {
    acme: {
      namespace: 'leoflow-acme',
      images: [],
      serviceAccounts: ['leoflow-task', 'etl-reader'],
      maxResources: { cpu: '2', memory: '1Gi' },
      defaultResources: {},
    },
  },
};
const policy = executorPolicy(['subprocess', 'kubernetes'], kube);

function refusal(tenant: string, tasks: Parameters<typeof spec>[0]['tasks']): LeoflowError | null {
  try {
    checkExecutorChoices(policy, tenant, spec({ dag_id: 'd', tasks }));
    return null;
  } catch (e) {
    return e as LeoflowError;
  }
}

describe('registration: executor choices against the tenant allowlist', () => {
  it('accepts choices within the allowlist, and the agent image as the default image', () => {
    expect(
      refusal('acme', [
        task('a', {
          executor: 'kubernetes',
          kubernetes: {
            image: 'registry.example/leoflow-agent:1',
            service_account: 'etl-reader',
            resources: { limits: { cpu: '2', memory: '1Gi' } },
          },
        }),
        task('b'),
      ]),
    ).toBeNull();
  });

  it('refuses a service account outside the allowlist (the confused deputy), naming the allowed ones', () => {
    const e = refusal('acme', [
      task('a', { executor: 'kubernetes', kubernetes: { service_account: 'cluster-admin' } }),
    ]);
    expect(e?.code).toBe('LF_DAG_KUBERNETES_NOT_ALLOWED');
    expect(e?.message).toContain('tasks[0].kubernetes.service_account');
    expect(e?.message).toContain('leoflow-task, etl-reader');
  });

  it('refuses an image and a resource above the ceiling', () => {
    const e = refusal('acme', [
      task('a', {
        executor: 'kubernetes',
        kubernetes: { image: 'docker.io/other:latest', resources: { requests: { memory: '4Gi' } } },
      }),
    ]);
    expect(e?.message).toContain('tasks[0].kubernetes.image');
    expect(e?.message).toContain('tasks[0].kubernetes.resources.requests.memory');
  });

  it('refuses kubernetes for a tenant without a placement, and an executor that is not configured', () => {
    expect(refusal('other-tenant', [task('a', { executor: 'kubernetes' })])?.message).toContain(
      'tenant "other-tenant" has no Kubernetes placement',
    );
    expect(refusal('acme', [task('a', { executor: 'runner' })])?.message).toContain(
      'names executor "runner", which this control plane does not run',
    );
    // Without the executor.kubernetes section, a kubernetes task is refused the same way.
    expect(() =>
      checkExecutorChoices(
        executorPolicy(['subprocess'], null),
        'acme',
        spec({ dag_id: 'd', tasks: [task('a', { executor: 'kubernetes' })] }),
      ),
    ).toThrow(/names executor "kubernetes"/);
  });
});
