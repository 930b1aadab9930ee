import { checkKubernetesAllowed, declaredUnion, type DagSpec, DagError } from '@leoflow/core';
import type { ExecutorPolicy } from '../../executor/executor-policy.js';
import type { ConnectionStore } from '../../store/ports/connections.js';
import type { VariableStore } from '../../store/ports/variables.js';

/**
 * Refuses a DAG version whose declarations (DAG ∪ every task) name Variables or Connections the
 * tenant does not have — before anything is written. Empty declarations are always valid.
 */
export async function checkDeclarations(
  store: VariableStore & ConnectionStore,
  tenantId: string,
  spec: DagSpec,
): Promise<void> {
  const problems: string[] = [];
  const variables = declaredUnion(spec, 'variables');
  if (variables.length > 0) {
    const known = await store.existingVariableKeys(tenantId, variables);
    const unknown = variables.filter((k) => !known.has(k));
    if (unknown.length > 0) {
      problems.push(
        `dag "${spec.dag_id}" declares unknown variable(s) ${unknown.join(', ')}; define them ` +
          `(leoflow variables set <key> <value>) or remove them from the DAG's variables: declaration`,
      );
    }
  }
  const connections = declaredUnion(spec, 'connections');
  if (connections.length > 0) {
    const known = await store.existingConnectionIds(tenantId, connections);
    const unknown = connections.filter((c) => !known.has(c));
    if (unknown.length > 0) {
      problems.push(
        `dag "${spec.dag_id}" declares unknown connection(s) ${unknown.join(', ')}; define them ` +
          `(leoflow connections set <id> --uri <uri>) or remove them from the DAG's connections: declaration`,
      );
    }
  }
  if (problems.length > 0) {
    throw new DagError('LF_DAG_UNKNOWN_DECLARATION', problems.join('; '), {
      dag_id: spec.dag_id,
    });
  }
}

/**
 * Refuses a DAG whose tasks name an executor this control plane does not run, or whose
 * Kubernetes choices (service account, image, resources) fall outside the tenant's operator
 * allowlist — before anything is written, so a DAG author can never get a pod created under a
 * service account the operator did not allow for the tenant (the confused deputy).
 */
export function checkExecutorChoices(
  policy: ExecutorPolicy,
  tenantId: string,
  spec: DagSpec,
): void {
  const problems: string[] = [];
  spec.tasks.forEach((task, i) => {
    const base = `tasks[${i}]`;
    if (task.executor !== undefined && !policy.executors.includes(task.executor)) {
      problems.push(
        `${base}.executor: task "${task.task_id}" names executor "${task.executor}", which this control plane does not run (configured: ${policy.executors.join(', ')})`,
      );
    }
    const onKubernetes =
      policy.kubernetesExecutor !== null && task.executor === policy.kubernetesExecutor;
    if (!onKubernetes && task.kubernetes === undefined) return;
    const allowlist = policy.kubernetesAllowlist(tenantId);
    if (!allowlist) {
      if (onKubernetes)
        problems.push(
          `${base}.executor: tenant "${tenantId}" has no Kubernetes placement (executor.kubernetes.tenants.${tenantId}); ask the operator to add one`,
        );
      return;
    }
    for (const issue of checkKubernetesAllowed(task.kubernetes, allowlist, `${base}.kubernetes`))
      problems.push(`${issue.path}: ${issue.message}; ${issue.hint}`);
  });
  if (problems.length > 0) {
    throw new DagError('LF_DAG_KUBERNETES_NOT_ALLOWED', problems.join('; '), {
      dag_id: spec.dag_id,
    });
  }
}
