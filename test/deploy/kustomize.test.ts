/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-return -- rendered YAML is untyped; the assertions are the checks */
/**
 * deploy/ rendered by the real `kubectl kustomize` (offline): the default install holds no
 * cluster-scoped object, every pod template passes Pod Security Admission `restricted`, and the
 * NetworkPolicy selects task pods by the labels the Kubernetes executor puts on them.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { loadCredentialPlaneConfig } from '@leoflow/core';
import { parseExecutorSection } from '../../packages/server/src/config/executor-config.js';
import { afterAll, describe, expect, it } from 'vitest';
import {
  LABEL,
  MANAGED_BY,
  TASK_COMPONENT,
} from '../../packages/server/src/executor/kubernetes/labels.js';
import { restrictedViolations } from '../../packages/server/test/support/pod-security.js';

const ROOT = resolve(fileURLToPath(import.meta.url), '../../..');
const cache = mkdtempSync(join(tmpdir(), 'leoflow-kustomize-'));
afterAll(() => rmSync(cache, { recursive: true, force: true }));

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- rendered YAML is untyped: the assertions walk it by path, and a wrong path fails them
type Obj = Record<string, any>;

function render(dir: string): Obj[] {
  const out = execFileSync(
    '/usr/bin/kubectl',
    ['kustomize', join(ROOT, dir), '--cache-dir', cache],
    {
      encoding: 'utf8',
    },
  );
  return parseAllDocuments(out).map((d) => d.toJSON() as Obj);
}

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
      expect(restrictedViolations(d.spec.template.spec, d.metadata.name)).toEqual([]);
  });

  it('the control plane runs `leoflow server --role api|scheduler` with /healthz and /readyz probes', () => {
    for (const role of ['api', 'scheduler']) {
      const c = objects.find(
        (o) => o.kind === 'Deployment' && o.metadata.name === `leoflow-${role}`,
      )!.spec.template.spec.containers[0];
      expect(c.args.slice(0, 3)).toEqual(['server', '--role', role]);
      expect([c.readinessProbe.httpGet.path, c.livenessProbe.httpGet.path]).toEqual([
        '/readyz',
        '/healthz',
      ]);
      // PostgreSQL is external: its URL comes from a Secret the operator provides.
      expect(
        c.env.find((e: Obj) => e.name === 'LEOFLOW_DATABASE_URL').valueFrom.secretKeyRef,
      ).toEqual({
        name: 'leoflow-postgres',
        key: 'url',
      });
    }
    // The agent channel's certificate is referenced, never generated: no Secret object rendered.
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    const sched = objects.find(
      (o) => o.kind === 'Deployment' && o.metadata.name === 'leoflow-scheduler',
    )!.spec.template.spec;
    expect(sched.volumes.find((v: Obj) => v.name === 'agent-tls').secret.secretName).toBe(
      'leoflow-agent-tls',
    );
  });

  it('the Role is namespaced and grants only pods, pods/status, pods/log and secrets', () => {
    const role = objects.find((o) => o.kind === 'Role')!;
    expect(role.rules.flatMap((r: Obj) => r.resources).sort()).toEqual(
      ['pods', 'pods/log', 'pods/status', 'secrets'].sort(),
    );
    expect(role.rules.flatMap((r: Obj) => r.apiGroups)).toEqual(['', '', '']);
  });

  it("the NetworkPolicy selects task pods by the executor's labels and lets them reach only the agent port", () => {
    const egress = objects.find((o) => o.metadata.name === 'leoflow-task-egress')!;
    expect(egress.spec.podSelector.matchLabels).toEqual({
      [LABEL.managedBy]: MANAGED_BY,
      [LABEL.component]: TASK_COMPONENT,
    });
    const toControlPlane = egress.spec.egress.filter((r: Obj) => r.to);
    expect(toControlPlane).toHaveLength(1);
    expect(toControlPlane[0].ports).toEqual([{ protocol: 'TCP', port: 8793 }]);
    // Only DNS besides: no rule without ports.
    for (const r of egress.spec.egress) expect(r.ports?.length).toBeGreaterThan(0);
    const ingress = objects.find((o) => o.metadata.name === 'leoflow-scheduler-ingress')!;
    const fromTasks = ingress.spec.ingress.find(
      (r: Obj) => r.from[0].podSelector.matchLabels[LABEL.component] === TASK_COMPONENT,
    );
    expect(fromTasks.ports).toEqual([{ protocol: 'TCP', port: 8793 }]);
  });

  it("the configuration it ships boots: the file parses, and every tenant's namespace is one where the control plane's Role is bound, its agent_url the agent Service of this install", () => {
    const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'leoflow-config')!;
    const { executor, ...rest } = parse(cm.data['config.yaml'] as string) as Obj;
    expect(() => loadCredentialPlaneConfig({ file: rest })).not.toThrow();
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
            o.roleRef.name === 'leoflow-control-plane' &&
            o.subjects.some((s: Obj) => s.name === 'leoflow-control-plane'),
        )
        .map((o) => o.metadata.namespace as string),
    );
    // A Kustomize namespace does not reach inside the file: an overlay that moves the install
    // and not its configuration would create pods where it has no rights (403 on every create).
    for (const [tenant, t] of Object.entries(kubernetes!.tenants))
      expect(`${tenant}: ${t.namespace}`).toBe(`${tenant}: ${[...bound][0]}`);
    expect(bound.size).toBe(1);
    const agent = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'leoflow-agent')!;
    expect(new URL(kubernetes!.agentUrl!).host).toBe(
      `leoflow-agent.${agent.metadata.namespace}.svc:${agent.spec.ports[0].port}`,
    );
  });
});
