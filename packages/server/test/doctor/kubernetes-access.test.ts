/**
 * Doctor's executor-rights check against the apiserver double, with the control plane's own
 * service-account token (so the double's RBAC evaluator really answers): a tenant whose namespace
 * has the shipped Role bound passes; one whose namespace does not (an overlay that moved the
 * install but not the configuration) fails, naming the tenant, the namespace, the missing rights
 * and the fix. Unreachable clusters warn without the client's error text.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, RbacAuthorizationV1Api, type V1PolicyRule } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseExecutorSection } from '../../src/config/executor-config.js';
import type { KubernetesExecutorConfig, ServerConfig } from '../../src/config/server-config.js';
import { kubernetesAccess } from '../../src/doctor/kubernetes-access.js';
import { openKubernetesAccessProbe } from '../../src/doctor/kubernetes-probe.js';
import { Findings, type SectionContext } from '../../src/doctor/findings.js';
import type { DoctorDeps } from '../../src/doctor/types.js';
import { startKubeTestCluster, type KubeTestCluster } from '../support/kube-cluster.js';

const REPO = join(import.meta.dirname, '../../../..');
const BOUND = 'leoflow-tasks';
const UNBOUND = 'leoflow-prod';
const SA = 'leoflow-control-plane';
let cluster: KubeTestCluster;
let saKubeconfig: string;

beforeAll(async () => {
  cluster = await startKubeTestCluster({
    prefix: 'leoflow-doctor-k8s-',
    namespaces: { [BOUND]: [SA], [UNBOUND]: [] },
  });
  const kc = cluster.adminConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  // The shipped Role, exactly as deploy/base carries it.
  const role = parse(readFileSync(join(REPO, 'deploy/base/role.yaml'), 'utf8')) as {
    rules: V1PolicyRule[];
  };
  await rbac.createNamespacedRole({
    namespace: BOUND,
    body: { metadata: { name: SA }, rules: role.rules },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: BOUND,
    body: {
      metadata: { name: SA },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: SA },
      subjects: [{ kind: 'ServiceAccount', name: SA, namespace: BOUND }],
    },
  });
  const tr = await core.createNamespacedServiceAccountToken({
    name: SA,
    namespace: BOUND,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  saKubeconfig = cluster.writeKubeconfig({ token: tr.status!.token, file: 'sa.kubeconfig' });
});

afterAll(async () => {
  await cluster?.stop();
});

function k8sConfig(tenants: Record<string, string>, kubeconfig: string): KubernetesExecutorConfig {
  return parseExecutorSection(
    {
      kubernetes: {
        kubeconfig,
        agent_image: 'leoflow-agent:doctor',
        agent_url: 'http://127.0.0.1:1',
        tenants: Object.fromEntries(
          Object.entries(tenants).map(([t, namespace]) => [
            t,
            { namespace, service_accounts: ['default'] },
          ]),
        ),
      },
    },
    null,
  ).kubernetes!;
}

async function run(kubernetes: KubernetesExecutorConfig | null, withProbe = true) {
  const findings = new Findings();
  const deps = (withProbe
    ? { kubernetesAccess: openKubernetesAccessProbe }
    : {}) as unknown as DoctorDeps;
  const ctx = {
    cfg: { kubernetes } as unknown as ServerConfig,
    deps,
    opts: {},
    check: findings.check,
    expose: findings.expose,
  } as unknown as SectionContext;
  await kubernetesAccess(ctx);
  return findings.checks;
}

describe('doctor: the Kubernetes executor may work in every tenant namespace', () => {
  it('passes when each tenant namespace has the shipped Role bound to the control plane', async () => {
    const checks = await run(k8sConfig({ a: BOUND, b: BOUND }, saKubeconfig));
    expect(checks).toEqual([
      {
        id: 'kubernetes.access',
        status: 'ok',
        message: `the control plane may run attempt pods in ${BOUND}`,
      },
    ]);
  });

  it('fails for a tenant whose namespace has no Role bound, naming tenant, namespace, rights and the fix', async () => {
    const checks = await run(k8sConfig({ a: BOUND, b: UNBOUND }, saKubeconfig));
    expect(checks).toHaveLength(1);
    const [c] = checks;
    expect(c!.status).toBe('fail');
    expect(c!.message).toContain(
      `tenant b: namespace ${UNBOUND} denies create pods, get pods, list pods, watch pods, delete pods, get pods/status`,
    );
    expect(c!.message).not.toContain('tenant a:');
    expect(c!.message).toContain('executor.kubernetes.tenants.<tenant>.namespace');
    expect(c!.message).toContain('deploy/base/role.yaml');
  });

  it('warns, without the client error text, when the cluster cannot be asked', async () => {
    const dead = cluster.writeKubeconfig({ file: 'dead.kubeconfig' });
    // the double writes JSON; nothing listens on port 1
    const doc = JSON.parse(readFileSync(dead, 'utf8')) as {
      clusters: { cluster: { server: string } }[];
    };
    for (const c of doc.clusters) c.cluster.server = 'https://127.0.0.1:1';
    writeFileSync(dead, JSON.stringify(doc));
    const checks = await run(k8sConfig({ a: BOUND }, dead));
    expect(checks).toEqual([
      {
        id: 'kubernetes.access',
        status: 'warn',
        message: 'could not ask the cluster: ECONNREFUSED reaching the apiserver',
      },
    ]);
  });

  it('says nothing without executor.kubernetes or without a way to reach a cluster', async () => {
    expect(await run(null)).toEqual([]);
    expect(await run(k8sConfig({ a: BOUND }, saKubeconfig), false)).toEqual([]);
  });
});
