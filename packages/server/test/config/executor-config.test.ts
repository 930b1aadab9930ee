import { isLeoflowError } from '@leoflow/core';
import { describe, expect, it } from 'vitest';
import { KUBERNETES_DEFAULTS, parseExecutorSection } from '../../src/config/executor-config.js';

const minimal = {
  kubernetes: {
    agent_image: 'ghcr.io/leoflow/agent:0.1.0',
    tenants: { default: { namespace: 'leoflow', service_accounts: ['leoflow-task'] } },
  },
};

/** The problems a refused section lists, by key (the stable part of LF_CONFIG_INVALID). */
function refusal(raw: unknown): { code: string; keys: string[]; message: string } {
  try {
    parseExecutorSection(raw, '/etc/leoflow/config.yaml');
  } catch (err) {
    if (!isLeoflowError(err)) throw err;
    const problems = (err.details as { problems: { key: string }[] }).problems;
    return { code: err.code, keys: problems.map((p) => p.key), message: err.message };
  }
  throw new Error('the section was accepted');
}

describe('executor section of the config file', () => {
  it('is optional: no section, no Kubernetes executor and the built-in default executor', () => {
    expect(parseExecutorSection(undefined, null)).toEqual({ kubernetes: null });
    expect(parseExecutorSection({ default: 'subprocess' }, null)).toEqual({
      kubernetes: null,
      defaultExecutor: 'subprocess',
    });
  });

  it('reads every executor.kubernetes key, with defaults for the optional ones', () => {
    expect(parseExecutorSection(minimal, null).kubernetes).toEqual({
      kubeconfig: null,
      agentImage: 'ghcr.io/leoflow/agent:0.1.0',
      agentUrl: null,
      podStartTimeoutMs: KUBERNETES_DEFAULTS.podStartTimeoutMs,
      instance: 'leoflow',
      runAsUser: 65532,
      terminationGracePeriodSeconds: 30,
      agentCaConfigMap: null,
      keepFinishedPods: false,
      tenants: {
        default: {
          namespace: 'leoflow',
          images: [],
          serviceAccounts: ['leoflow-task'],
          maxResources: {},
          defaultResources: {},
        },
      },
    });
    const full = parseExecutorSection(
      {
        default: 'kubernetes',
        kubernetes: {
          kubeconfig: 'kube/config',
          agent_image: 'agent:1',
          agent_url: 'https://leoflow-agent.team-a.svc:8793',
          pod_start_timeout: '90s',
          instance: 'prod-1',
          run_as_user: 1001,
          termination_grace_period: 10,
          agent_ca_config_map: { name: 'leoflow-agent-ca' },
          keep_finished_pods: true,
          tenants: {
            acme: {
              namespace: 'team-a',
              images: ['agent:1', 'agent-gpu:1'],
              service_accounts: ['task', 'task-s3'],
              max_resources: { cpu: 2, memory: '2Gi' },
              default_resources: { requests: { cpu: '100m' }, limits: { memory: '512Mi' } },
            },
          },
        },
      },
      '/etc/leoflow/config.yaml',
    );
    expect(full.defaultExecutor).toBe('kubernetes');
    expect(full.kubernetes).toMatchObject({
      // relative to the config file's directory, not the process's cwd
      kubeconfig: '/etc/leoflow/kube/config',
      agentUrl: 'https://leoflow-agent.team-a.svc:8793',
      podStartTimeoutMs: 90_000,
      instance: 'prod-1',
      runAsUser: 1001,
      terminationGracePeriodSeconds: 10,
      agentCaConfigMap: { name: 'leoflow-agent-ca', key: 'ca.crt' },
      keepFinishedPods: true,
      tenants: {
        acme: {
          namespace: 'team-a',
          images: ['agent:1', 'agent-gpu:1'],
          serviceAccounts: ['task', 'task-s3'],
          maxResources: { cpu: '2', memory: '2Gi' },
          defaultResources: { requests: { cpu: '100m' }, limits: { memory: '512Mi' } },
        },
      },
    });
  });

  it('refuses every problem at once, each named by its dotted key, as LF_CONFIG_INVALID', () => {
    const r = refusal({
      default: 'docker',
      kubernetes: {
        agent_imag: 'x',
        pod_start_timeout: 'soon',
        instance: 'Not A Label!',
        run_as_user: 0,
        agent_url: 'leoflow-agent:8793',
        tenants: {
          acme: {
            namespace: 'Team_A',
            service_accounts: ['Bad SA'],
            max_resources: { gpu: 1, memory: 'lots' },
            default_resources: { requests: { cpu: 'x' } },
            node_selector: {},
          },
        },
      },
    });
    expect(r.code).toBe('LF_CONFIG_INVALID');
    expect(r.keys.sort()).toEqual(
      [
        'executor.default',
        'executor.kubernetes.agent_imag',
        'executor.kubernetes.agent_image',
        'executor.kubernetes.agent_url',
        'executor.kubernetes.instance',
        'executor.kubernetes.pod_start_timeout',
        'executor.kubernetes.run_as_user',
        'executor.kubernetes.tenants.acme.default_resources',
        'executor.kubernetes.tenants.acme.max_resources.gpu',
        'executor.kubernetes.tenants.acme.max_resources.memory',
        'executor.kubernetes.tenants.acme.namespace',
        'executor.kubernetes.tenants.acme.node_selector',
        'executor.kubernetes.tenants.acme.service_accounts[0]',
      ].sort(),
    );
    expect(r.message).toMatch(
      /executor\.default is "docker"; set it to one of subprocess, kubernetes/,
    );
  });

  it('refuses executor.default kubernetes without the section, and a section without tenants or service accounts', () => {
    expect(refusal({ default: 'kubernetes' }).message).toMatch(
      /no executor\.kubernetes section; add it/,
    );
    expect(refusal({ kubernetes: { agent_image: 'a', tenants: {} } }).keys).toEqual([
      'executor.kubernetes.tenants',
    ]);
    expect(
      refusal({ kubernetes: { agent_image: 'a', tenants: { t: { namespace: 'n' } } } }).keys,
    ).toEqual(['executor.kubernetes.tenants.t.service_accounts']);
    expect(refusal(['kubernetes']).keys).toEqual(['executor']);
  });
});
