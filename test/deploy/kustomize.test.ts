/**
 * deploy/ rendered by the real `kubectl kustomize` (offline): the default install holds no
 * cluster-scoped object, every pod template passes Pod Security Admission `restricted`, and the
 * NetworkPolicy selects task pods by the labels the Kubernetes executor puts on them.
 */
import { loadCredentialPlaneConfig } from '@leoflow/core';
import { parseExecutorSection } from '../../packages/server/src/config/executor-config.js';
import { describe, expect, it } from 'vitest';
import {
  LABEL,
  MANAGED_BY,
  TASK_COMPONENT,
} from '../../packages/server/src/executor/kubernetes/labels.js';
import { restrictedViolations } from '../../packages/server/test/support/pod-security.js';
import {
  arrayAt,
  at,
  container,
  find,
  podSpec,
  recordAt,
  render,
  shippedConfig,
  stringAt,
} from '../support/manifests.js';

/** Kinds a default install may hold: all namespaced. */
const NAMESPACED = new Set([
  'ServiceAccount',
  'Role',
  'RoleBinding',
  'ConfigMap',
  'Deployment',
  'Service',
  'PodDisruptionBudget',
  'NetworkPolicy',
]);

describe.each(['deploy/base', 'deploy/overlays/example'])('%s', (dir) => {
  const objects = render(dir);

  it('holds no cluster-scoped object (no ClusterRole, no Namespace), every object in one namespace', () => {
    expect(objects.length).toBeGreaterThan(5);
    for (const o of objects) {
      expect(NAMESPACED.has(o.kind), `${o.kind}/${o.metadata.name}`).toBe(true);
      expect(o.metadata.namespace).toBe(dir.endsWith('example') ? 'leoflow-prod' : 'leoflow');
    }
  });

  it('every pod template passes Pod Security Admission restricted', () => {
    const templates = objects.filter((o) => o.kind === 'Deployment');
    expect(templates.map((o) => o.metadata.name).sort()).toEqual([
      'leoflow-api',
      'leoflow-scheduler',
    ]);
    for (const d of templates)
      expect(restrictedViolations(podSpec(d), d.metadata.name)).toEqual([]);
  });

  it('the control plane runs `leoflow server --role api|scheduler` with /healthz and /readyz probes', () => {
    for (const role of ['api', 'scheduler']) {
      const c = container(find(objects, 'Deployment', `leoflow-${role}`));
      expect(arrayAt(c, 'args').slice(0, 3)).toEqual(['server', '--role', role]);
      expect([
        stringAt(c, 'readinessProbe', 'httpGet', 'path'),
        stringAt(c, 'livenessProbe', 'httpGet', 'path'),
      ]).toEqual(['/readyz', '/healthz']);
      // PostgreSQL is external: its URL comes from a Secret the operator provides.
      const dbUrl = arrayAt(c, 'env').find((e) => at(e, 'name') === 'LEOFLOW_DATABASE_URL');
      expect(recordAt(dbUrl, 'valueFrom', 'secretKeyRef')).toEqual({
        name: 'leoflow-postgres',
        key: 'url',
      });
    }
    // The agent channel's certificate is referenced, never generated: no Secret object rendered.
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    const sched = podSpec(find(objects, 'Deployment', 'leoflow-scheduler'));
    const agentTls = arrayAt(sched, 'volumes').find((v) => at(v, 'name') === 'agent-tls');
    expect(stringAt(agentTls, 'secret', 'secretName')).toBe('leoflow-agent-tls');
  });

  it('the Role is namespaced and grants only pods, pods/status, pods/log and secrets', () => {
    const rules = arrayAt(find(objects, 'Role'), 'rules');
    expect(rules.flatMap((r) => arrayAt(r, 'resources')).sort()).toEqual(
      ['pods', 'pods/log', 'pods/status', 'secrets'].sort(),
    );
    expect(rules.flatMap((r) => arrayAt(r, 'apiGroups'))).toEqual(['', '', '']);
  });

  it("the NetworkPolicy selects task pods by the executor's labels and lets them reach only the agent port", () => {
    const egress = find(objects, 'NetworkPolicy', 'leoflow-task-egress');
    expect(at(egress, 'spec', 'podSelector', 'matchLabels')).toEqual({
      [LABEL.managedBy]: MANAGED_BY,
      [LABEL.component]: TASK_COMPONENT,
    });
    const egressRules = arrayAt(egress, 'spec', 'egress');
    const toControlPlane = egressRules.filter((r) => at(r, 'to'));
    expect(toControlPlane).toHaveLength(1);
    expect(at(toControlPlane, 0, 'ports')).toEqual([{ protocol: 'TCP', port: 8793 }]);
    // Only DNS besides: no rule without ports.
    for (const r of egressRules) expect(arrayAt(r, 'ports').length).toBeGreaterThan(0);
    const ingress = find(objects, 'NetworkPolicy', 'leoflow-scheduler-ingress');
    const fromTasks = arrayAt(ingress, 'spec', 'ingress').find(
      (r) =>
        recordAt(r, 'from', 0, 'podSelector', 'matchLabels')[LABEL.component] === TASK_COMPONENT,
    );
    expect(arrayAt(fromTasks, 'ports')).toEqual([{ protocol: 'TCP', port: 8793 }]);
  });

  it("the configuration it ships boots: the file parses, and every tenant's namespace is one where the control plane's Role is bound, its agent_url the agent Service of this install", () => {
    const { executor, ...rest } = shippedConfig(objects);
    expect(() => loadCredentialPlaneConfig({ file: rest })).not.toThrow();
    // issue 34: what ships keeps the promise — scoping and liveness enforced, as the defaults
    const { config } = loadCredentialPlaneConfig({ file: rest });
    expect([config.secretScoping, config.secretLivenessMode]).toEqual(['enforce', 'enforce']);
    const { kubernetes, defaultExecutor } = parseExecutorSection(
      executor,
      '/etc/leoflow/config.yaml',
    );
    expect(defaultExecutor).toBe('kubernetes');
    const bound = new Set(
      objects
        .filter(
          (o) =>
            o.kind === 'RoleBinding' &&
            stringAt(o, 'roleRef', 'name') === 'leoflow-control-plane' &&
            arrayAt(o, 'subjects').some((s) => at(s, 'name') === 'leoflow-control-plane'),
        )
        .map((o) => o.metadata.namespace),
    );
    // A Kustomize namespace does not reach inside the file: an overlay that moves the install
    // and not its configuration would create pods where it has no rights (403 on every create).
    for (const [tenant, t] of Object.entries(kubernetes!.tenants))
      expect(`${tenant}: ${t.namespace}`).toBe(`${tenant}: ${[...bound][0]}`);
    expect(bound.size).toBe(1);
    const agent = find(objects, 'Service', 'leoflow-agent');
    expect(new URL(kubernetes!.agentUrl!).host).toBe(
      `leoflow-agent.${agent.metadata.namespace}.svc:${String(at(agent, 'spec', 'ports', 0, 'port'))}`,
    );
  });
});
