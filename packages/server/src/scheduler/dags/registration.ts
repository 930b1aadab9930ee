import {
  checkKubernetesAllowed,
  declaredUnion,
  grantMatcher,
  notGrantedMessage,
  SECRET_NOT_GRANTED_CODE,
  type DagSpec,
  DagError,
  LeoflowError,
} from '@leoflow/core';
import type { ExecutorPolicy } from '../../executor/executor-policy.js';
import type { SecretGrantKind, SecretGrantStore } from '../../store/ports/secret-grants.js';

const HOW_TO_DEFINE: Record<SecretGrantKind, string> = {
  variables: 'leoflow variables set <key> <value>',
  connections: 'leoflow connections set <id> --uri <uri>',
};

/**
 * Refuses a DAG version whose declarations (DAG ∪ every task) name Variables or Connections the
 * tenant does not have (LF_DAG_UNKNOWN_DECLARATION), or that are not granted to this DAG id
 * (LF_SECRET_NOT_GRANTED, issue 34) — before anything is written. One query per kind reads both
 * the existence and the grants. Empty declarations are always valid.
 */
export async function checkDeclarations(
  store: Pick<SecretGrantStore, 'getSecretGrants'>,
  tenantId: string,
  spec: DagSpec,
): Promise<void> {
  const unknownProblems: string[] = [];
  const ungranted: string[] = [];
  for (const kind of ['variables', 'connections'] as const) {
    const names = declaredUnion(spec, kind);
    if (names.length === 0) continue;
    const grants = await store.getSecretGrants(tenantId, kind, names);
    const unknown = names.filter((n) => !grants.has(n));
    if (unknown.length > 0) {
      unknownProblems.push(
        `dag "${spec.dag_id}" declares unknown ${kind === 'variables' ? 'variable' : 'connection'}(s) ${unknown.join(', ')}; define them ` +
          `(${HOW_TO_DEFINE[kind]}) or remove them from the DAG's ${kind}: declaration`,
      );
      continue;
    }
    const refused = names.filter((n) => !grantMatcher(grants.get(n) ?? null)(spec.dag_id));
    if (refused.length > 0) ungranted.push(notGrantedMessage(spec.dag_id, kind, refused));
  }
  if (unknownProblems.length > 0) {
    throw new DagError('LF_DAG_UNKNOWN_DECLARATION', unknownProblems.join('; '), {
      dag_id: spec.dag_id,
    });
  }
  if (ungranted.length > 0) {
    throw new LeoflowError(SECRET_NOT_GRANTED_CODE, ungranted.join('; '), {
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
