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

/** One refused declaration: a name the tenant does not have, or one not granted to the DAG. */
export interface DeclarationProblem {
  kind: SecretGrantKind;
  name: string;
  code: 'LF_DAG_UNKNOWN_DECLARATION' | typeof SECRET_NOT_GRANTED_CODE;
  /** what to do about it, in one sentence */
  hint: string;
}

/**
 * Every declared name (DAG ∪ every task) the tenant does not have, or that is not granted to
 * this DAG id, in declaration order. One query per kind reads both the existence and the
 * grants. Empty declarations are always valid.
 */
export async function declarationProblems(
  store: Pick<SecretGrantStore, 'getSecretGrants'>,
  tenantId: string,
  spec: DagSpec,
): Promise<DeclarationProblem[]> {
  const problems: DeclarationProblem[] = [];
  for (const kind of ['variables', 'connections'] as const) {
    const names = declaredUnion(spec, kind);
    if (names.length === 0) continue;
    const grants = await store.getSecretGrants(tenantId, kind, names);
    const unknown = names.filter((n) => !grants.has(n));
    if (unknown.length > 0) {
      for (const name of unknown)
        problems.push({
          kind,
          name,
          code: 'LF_DAG_UNKNOWN_DECLARATION',
          hint: `define it (${HOW_TO_DEFINE[kind]}) or remove it from the ${kind}: declaration`,
        });
      continue;
    }
    for (const name of names.filter((n) => !grantMatcher(grants.get(n) ?? null)(spec.dag_id)))
      problems.push({
        kind,
        name,
        code: SECRET_NOT_GRANTED_CODE,
        hint: `ask an admin to add a pattern matching "${spec.dag_id}" to its grants (leoflow ${kind} set-grants) or remove it from the declaration`,
      });
  }
  return problems;
}

/**
 * Refuses a DAG version whose declarations (DAG ∪ every task) name Variables or Connections the
 * tenant does not have (LF_DAG_UNKNOWN_DECLARATION), or that are not granted to this DAG id
 * (LF_SECRET_NOT_GRANTED, issue 34) — before anything is written.
 */
export async function checkDeclarations(
  store: Pick<SecretGrantStore, 'getSecretGrants'>,
  tenantId: string,
  spec: DagSpec,
): Promise<void> {
  const problems = await declarationProblems(store, tenantId, spec);
  const unknownProblems: string[] = [];
  const ungranted: string[] = [];
  for (const kind of ['variables', 'connections'] as const) {
    const of = (code: string) =>
      problems.filter((p) => p.kind === kind && p.code === code).map((p) => p.name);
    const unknown = of('LF_DAG_UNKNOWN_DECLARATION');
    if (unknown.length > 0) {
      unknownProblems.push(
        `dag "${spec.dag_id}" declares unknown ${kind === 'variables' ? 'variable' : 'connection'}(s) ${unknown.join(', ')}; define them ` +
          `(${HOW_TO_DEFINE[kind]}) or remove them from the DAG's ${kind}: declaration`,
      );
    }
    const refused = of(SECRET_NOT_GRANTED_CODE);
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
