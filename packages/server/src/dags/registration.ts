import { declaredUnion, type DagSpec, DagError } from '@leoflow/core';
import type { ConnectionStore } from '../store/ports/connections.js';
import type { VariableStore } from '../store/ports/variables.js';

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
