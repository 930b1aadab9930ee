import type { KubernetesExecutorConfig } from '../config/server-config.js';
import type { SectionContext } from './findings.js';
import type { KubernetesAccessProbe, KubernetesRight } from './types.js';

/**
 * What the executor does in every tenant namespace: create attempt pods, watch them, read their
 * status, delete finished ones, re-adopt them by label after a restart (list). The shipped Role
 * (deploy/base/role.yaml) grants exactly these and more; a namespace without that Role bound is
 * the usual mistake of an overlay that moved the install but not `tenants.*.namespace`.
 */
export const EXECUTOR_RIGHTS: readonly KubernetesRight[] = [
  { verb: 'create', resource: 'pods' },
  { verb: 'get', resource: 'pods' },
  { verb: 'list', resource: 'pods' },
  { verb: 'watch', resource: 'pods' },
  { verb: 'delete', resource: 'pods' },
  { verb: 'get', resource: 'pods', subresource: 'status' },
];

function describe(r: KubernetesRight): string {
  return `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''}`;
}

/**
 * Doctor section: for each tenant of executor.kubernetes, may the control plane do in that
 * tenant's namespace what the executor does? Read-only: SelfSubjectAccessReviews create nothing.
 * Without executor.kubernetes, or without a way to reach a cluster (deps.kubernetesAccess), it
 * reports nothing.
 */
export async function kubernetesAccess(ctx: SectionContext): Promise<void> {
  const k8s: KubernetesExecutorConfig | null = ctx.cfg.kubernetes;
  const open = ctx.deps.kubernetesAccess;
  if (!k8s || !open) return;
  const tenants = Object.entries(k8s.tenants).sort(([a], [b]) => a.localeCompare(b));
  if (tenants.length === 0) return;
  let probe: KubernetesAccessProbe;
  try {
    probe = await open(k8s);
  } catch (err) {
    ctx.check('kubernetes.access', 'warn', `could not ask the cluster: ${errorClass(err)}`);
    return;
  }
  const missing: string[] = [];
  try {
    for (const [tenant, t] of tenants) {
      const denied: string[] = [];
      for (const right of EXECUTOR_RIGHTS) {
        if (!(await probe.allowed(t.namespace, right))) denied.push(describe(right));
      }
      if (denied.length > 0) {
        missing.push(`tenant ${tenant}: namespace ${t.namespace} denies ${denied.join(', ')}`);
      }
    }
  } catch (err) {
    ctx.check('kubernetes.access', 'warn', `could not ask the cluster: ${errorClass(err)}`);
    return;
  }
  if (missing.length === 0) {
    const namespaces = [...new Set(tenants.map(([, t]) => t.namespace))].join(', ');
    ctx.check('kubernetes.access', 'ok', `the control plane may run attempt pods in ${namespaces}`);
    return;
  }
  ctx.check(
    'kubernetes.access',
    'fail',
    `${missing.join('; ')}. Bind the leoflow-control-plane Role (deploy/base/role.yaml) to the control plane's ServiceAccount in each of these namespaces, or set executor.kubernetes.tenants.<tenant>.namespace to the namespace it is bound in — a Kustomize namespace does not reach inside the configuration file, so an overlay that moves the install must change it too`,
  );
}

/** Never the error's text: it may carry the apiserver URL or a server's message. */
function errorClass(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (typeof code === 'number' || typeof status === 'number') {
    return `the apiserver answered HTTP ${String(typeof code === 'number' ? code : status)}`;
  }
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return `${code} reaching the apiserver`;
  return 'no kubeconfig and not in a cluster, or the apiserver is unreachable';
}
