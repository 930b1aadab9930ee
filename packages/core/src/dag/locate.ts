import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node } from 'yaml';

/** Where a name sits in a leoflow.yaml: 1-based line and column, and its YAML path. */
export interface YamlPosition {
  line: number;
  column: number;
  path: string;
}

/**
 * Finds where a leoflow.yaml declares `name` under `variables:` or `connections:` — the DAG's
 * list first, then each task's (inside task groups too) — so a declaration refused at
 * registration (unknown, not granted) points at file:line:column like a compile error does.
 * Null when the text does not parse or does not hold the name (the caller then points at 1:1).
 */
export function locateDeclaration(
  text: string,
  kind: 'variables' | 'connections',
  name: string,
): YamlPosition | null {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0 || !isMap(doc.contents)) return null;
  const at = (node: Node, path: string): YamlPosition | null => {
    if (!node.range) return null;
    const pos = lineCounter.linePos(node.range[0]);
    return { line: pos.line, column: pos.col, path };
  };
  const inList = (list: unknown, base: string): YamlPosition | null => {
    if (!isSeq(list)) return null;
    for (const [i, item] of list.items.entries()) {
      if (isScalar(item) && item.value === name) return at(item, `${base}[${i}]`);
    }
    return null;
  };
  const inTasks = (tasks: unknown, base: string): YamlPosition | null => {
    if (!isSeq(tasks)) return null;
    for (const [i, task] of tasks.items.entries()) {
      if (!isMap(task)) continue;
      const found =
        inList(task.get(kind, true), `${base}[${i}].${kind}`) ??
        inTasks(task.get('tasks', true), `${base}[${i}].tasks`);
      if (found) return found;
    }
    return null;
  };
  return (
    inList(doc.contents.get(kind, true), kind) ?? inTasks(doc.contents.get('tasks', true), 'tasks')
  );
}
