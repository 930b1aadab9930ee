export type SecretKind = 'variables' | 'connections';

/**
 * The parts of a spec declarations live in (DagSpec has them all; the web app's view of a spec
 * too, which is why this is structural: the page shows exactly what delivery computes).
 */
export interface DeclaringSpec {
  variables?: readonly string[];
  connections?: readonly string[];
  tasks: readonly {
    task_id: string;
    variables?: readonly string[];
    connections?: readonly string[];
  }[];
}

/** Which list a task's declared set comes from. */
export type DeclarationSource = 'task' | 'dag' | 'none';

/**
 * What a task declared, and from where: its own list when non-empty, else the DAG's. An
 * explicit empty list on a task therefore inherits the DAG's list — it does not mean "nothing".
 * Secret delivery (declaredSet) and the web app's DAG page both use this.
 */
export function effectiveDeclaration(
  spec: DeclaringSpec,
  taskId: string,
  kind: SecretKind,
): { names: string[]; from: DeclarationSource } {
  const task = spec.tasks.find((t) => t.task_id === taskId);
  const own = task?.[kind] ?? [];
  if (own.length > 0) return { names: [...own], from: 'task' };
  const dag = spec[kind] ?? [];
  return dag.length > 0 ? { names: [...dag], from: 'dag' } : { names: [], from: 'none' };
}

/** What a task declared: its own list when non-empty, else the DAG's (effectiveDeclaration). */
export function declaredSet(spec: DeclaringSpec, taskId: string, kind: SecretKind): string[] {
  return effectiveDeclaration(spec, taskId, kind).names;
}

/**
 * Every name the DAG declares anywhere (DAG ∪ all tasks), de-duplicated in first-seen order —
 * what registration checks against the vault.
 */
export function declaredUnion(spec: DeclaringSpec, kind: SecretKind): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const name of [...(spec[kind] ?? []), ...spec.tasks.flatMap((t) => t[kind] ?? [])]) {
    if (!seen.has(name)) {
      seen.add(name);
      out.push(name);
    }
  }
  return out;
}
