import type { DagSpec } from '../dag/spec.js';

export type SecretKind = 'variables' | 'connections';

/**
 * What a task declared: its own list when non-empty, else the DAG's. An explicit empty list on
 * a task therefore inherits the DAG's list — it does not mean "nothing".
 */
export function declaredSet(spec: DagSpec, taskId: string, kind: SecretKind): string[] {
  const task = spec.tasks.find((t) => t.task_id === taskId);
  const own = task ? task[kind] : [];
  return own.length > 0 ? [...own] : [...spec[kind]];
}

/**
 * Every name the DAG declares anywhere (DAG ∪ all tasks), de-duplicated in first-seen order —
 * what registration checks against the vault.
 */
export function declaredUnion(spec: DagSpec, kind: SecretKind): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const name of [...spec[kind], ...spec.tasks.flatMap((t) => t[kind])]) {
    if (!seen.has(name)) {
      seen.add(name);
      out.push(name);
    }
  }
  return out;
}
