import { validateSchedule } from '../schedule/timetable.js';
import { isCanonicalTimestamp } from './dates.js';
import { DAG_ERROR_CODES as C, childPath, didYouMean, indexPath } from './diagnostics.js';
import { checkTimezone, normalizeSchedule } from './schedule.js';
import { checkKubernetesShape } from './kubernetes.js';
import { checkRunnerLabels } from './runner-labels.js';
import { checkShapes } from './semantic-shapes.js';
import { ID_PATTERN, type DagSpec } from './spec.js';

/**
 * Checks that need the whole DAG rather than one value: ids, duplicates, the dependency graph,
 * schedule, timezone, dates, env names. Shared by the YAML compiler (which adds positions) and
 * validateDagSpec (which checks a dag.json pushed through the API), so both reject the same
 * things with the same codes.
 */
export interface SemanticIssue {
  code: string;
  severity: 'error' | 'warning';
  path: string;
  message: string;
  hint: string;
  /** the diagnostic points at the mapping key rather than its value */
  atKey?: boolean;
}

export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RESERVED_ENV_PREFIX = 'leoflow_';

export function isReservedEnvName(key: string): boolean {
  return key.toLowerCase().startsWith(RESERVED_ENV_PREFIX);
}

const ID_HINT =
  'ids start with a letter, digit or underscore, then use only letters, digits, _ . - (at most 200 characters)';

export function suggestId(raw: string): string {
  const cleaned = raw
    .trim()
    .replace(/[^a-zA-Z0-9_.-]+/g, '_')
    .replace(/^[.-]+/, '')
    .slice(0, 200);
  return cleaned || 'my_id';
}

export function checkDagSemantics(
  spec: DagSpec,
  skip: (path: string) => boolean = () => false,
): SemanticIssue[] {
  const issues: SemanticIssue[] = [];
  const add = (issue: SemanticIssue): void => {
    if (!skip(issue.path)) issues.push(issue);
  };
  const err = (code: string, path: string, message: string, hint: string, atKey = false): void =>
    add({ code, severity: 'error', path, message, hint, atKey });

  const checkId = (value: string, path: string, what: string): void => {
    if (!ID_PATTERN.test(value)) {
      err(
        C.BAD_ID,
        path,
        `${what} "${value}" is not a valid id`,
        `${ID_HINT}; for example "${suggestId(value)}"`,
      );
    }
  };

  checkId(spec.dag_id, 'dag_id', 'dag_id');

  checkUnique(spec.tags, 'tags', 'tag', false, err);

  if (spec.schedule !== null) {
    const r = normalizeSchedule(spec.schedule);
    if (!r.ok) err(C.BAD_CRON, 'schedule', r.message, r.hint);
    else if (r.schedule !== spec.schedule) {
      err(
        C.BAD_CRON,
        'schedule',
        `schedule "${spec.schedule}" is not in normal form`,
        `write "${r.schedule}"`,
      );
    }
  }

  const tz = checkTimezone(spec.schedule_timezone);
  if (!tz.ok) {
    err(
      C.UNKNOWN_TIMEZONE,
      'schedule_timezone',
      `unknown time zone "${spec.schedule_timezone}"`,
      tz.hint,
    );
  } else if (spec.schedule !== null && normalizeSchedule(spec.schedule).ok) {
    // The scheduler's own parser has the last word, so a DAG that compiles is one it can plan.
    try {
      validateSchedule(spec.schedule, spec.schedule_timezone);
    } catch (e) {
      err(
        C.BAD_CRON,
        'schedule',
        e instanceof Error ? e.message : String(e),
        'write a 5-field cron expression such as "0 6 * * *"',
      );
    }
  }

  let datesOk = true;
  for (const key of ['start_date', 'end_date'] as const) {
    const v = spec[key];
    if (v !== null && !isCanonicalTimestamp(v)) {
      datesOk = false;
      err(
        C.BAD_DATE,
        key,
        `${key} "${v}" is not an RFC 3339 UTC timestamp`,
        'write it as YYYY-MM-DDTHH:MM:SS.sssZ, e.g. 2026-01-01T00:00:00.000Z',
      );
    }
  }
  if (
    datesOk &&
    spec.start_date !== null &&
    spec.end_date !== null &&
    spec.end_date < spec.start_date
  ) {
    err(
      C.BAD_DATE,
      'end_date',
      `end_date ${spec.end_date} is before start_date ${spec.start_date}`,
      'move end_date after start_date, or remove end_date to schedule without an end',
    );
  }

  if (
    spec.catchup &&
    spec.start_date === null &&
    spec.schedule !== null &&
    spec.schedule !== '@once'
  ) {
    add({
      code: C.CATCHUP_WITHOUT_START,
      severity: 'warning',
      path: 'catchup',
      message: 'catchup is true but there is no start_date, so there is nothing to catch up',
      hint: 'add start_date: YYYY-MM-DD, or remove catchup',
    });
  }

  checkDeclarations(spec.variables, 'variables', 'variable key', checkId, err);
  checkDeclarations(spec.connections, 'connections', 'connection id', checkId, err);

  // First occurrence of each task id wins; later ones are reported as duplicates.
  const firstIndex = new Map<string, number>();
  spec.tasks.forEach((task, i) => {
    const idPath = childPath(indexPath('tasks', i), 'task_id');
    if (skip(idPath)) return;
    checkId(task.task_id, idPath, 'task_id');
    const first = firstIndex.get(task.task_id);
    if (first === undefined) firstIndex.set(task.task_id, i);
    else {
      err(
        C.DUPLICATE_TASK,
        idPath,
        `task_id "${task.task_id}" is already used by tasks[${first}]`,
        `give this task a different task_id, e.g. "${task.task_id}_2", or delete one of the two`,
      );
    }
  });

  let unknownCount = 0;
  const someTasks =
    [...firstIndex.keys()].slice(0, 10).join(', ') + (firstIndex.size > 10 ? ', …' : '');
  spec.tasks.forEach((task, i) => {
    const base = indexPath('tasks', i);
    const depsPath = childPath(base, 'depends_on');
    const seenDeps = new Set<string>();
    task.depends_on.forEach((dep, j) => {
      const p = indexPath(depsPath, j);
      if (seenDeps.has(dep)) {
        err(
          C.DUPLICATE_DECLARATION,
          p,
          `"${dep}" is listed twice in depends_on`,
          `remove the second "${dep}"`,
        );
        return;
      }
      seenDeps.add(dep);
      if (!firstIndex.has(dep)) {
        // Suggestions cost O(tasks) each; a file with thousands of bad references (generated,
        // or a renamed task) must not turn that quadratic.
        const guess =
          unknownCount++ < MAX_SUGGESTIONS ? didYouMean(dep, firstIndex.keys()) : undefined;
        err(
          C.UNKNOWN_UPSTREAM,
          p,
          `task "${task.task_id}" depends on "${dep}", which is not a task in this DAG`,
          guess
            ? `did you mean "${guess}"?`
            : `add a task with task_id: ${dep}, or remove it from depends_on (tasks: ${someTasks})`,
        );
      }
    });

    const envPath = childPath(base, 'env');
    for (const [key, value] of Object.entries(task.env)) {
      const p = childPath(envPath, key);
      if (isReservedEnvName(key)) {
        err(
          C.RESERVED_ENV,
          p,
          `env key "${key}" is reserved: LEOFLOW_* variables belong to the agent and are stripped before your task runs`,
          `rename it, e.g. "${key.replace(/^leoflow_/i, 'APP_')}"`,
          true,
        );
      } else if (!ENV_NAME_PATTERN.test(key)) {
        err(
          C.BAD_ENV,
          p,
          `env key "${key}" is not a valid environment variable name`,
          `use letters, digits and _ and do not start with a digit, e.g. "${key.replace(/[^A-Za-z0-9_]/g, '_').replace(/^(\d)/, '_$1')}"`,
          true,
        );
      }
      if (value.includes('\0')) {
        err(
          C.BAD_ENV,
          p,
          `env value of "${key}" contains a NUL character, which no process environment can hold`,
          'remove the \\0 from the value',
        );
      }
    }

    if (task.executor !== undefined && !ID_PATTERN.test(task.executor)) {
      err(
        C.KUBERNETES,
        childPath(base, 'executor'),
        `executor "${task.executor}" is not an executor name`,
        'name a configured executor, e.g. executor: kubernetes (or remove the key for the default)',
      );
    }
    if (task.runner_labels !== undefined) {
      for (const issue of checkRunnerLabels(task, childPath(base, 'runner_labels')))
        err(C.RUNNER_LABELS, issue.path, issue.message, issue.hint);
    }
    if (task.kubernetes !== undefined) {
      for (const issue of checkKubernetesShape(task.kubernetes, childPath(base, 'kubernetes')))
        err(C.KUBERNETES, issue.path, issue.message, issue.hint);
    }

    checkDeclarations(task.variables, childPath(base, 'variables'), 'variable key', checkId, err);
    checkDeclarations(
      task.connections,
      childPath(base, 'connections'),
      'connection id',
      checkId,
      err,
    );
  });

  for (const issue of findCycles(spec, firstIndex, skip)) add(issue);
  checkShapes(spec, firstIndex, add);
  return issues;
}

type ErrFn = (code: string, path: string, message: string, hint: string, atKey?: boolean) => void;

function checkDeclarations(
  names: string[],
  listPath: string,
  what: string,
  checkId: (v: string, p: string, w: string) => void,
  err: ErrFn,
): void {
  names.forEach((name, i) => checkId(name, indexPath(listPath, i), what));
  // Delivery upper-cases names into AIRFLOW_VAR_<KEY> / AIRFLOW_CONN_<ID>, so names that differ
  // only by case would land in the same environment variable.
  checkUnique(names, listPath, what, true, err);
}

function checkUnique(
  names: string[],
  listPath: string,
  what: string,
  foldCase: boolean,
  err: ErrFn,
): void {
  const seen = new Map<string, string>();
  names.forEach((name, i) => {
    const k = foldCase ? name.toUpperCase() : name;
    const prev = seen.get(k);
    if (prev === undefined) {
      seen.set(k, name);
      return;
    }
    const message =
      prev === name
        ? `${what} "${name}" is listed twice`
        : `${what} "${name}" collides with "${prev}": both are delivered as the same upper-cased environment variable`;
    err(C.DUPLICATE_DECLARATION, indexPath(listPath, i), message, `remove the second "${name}"`);
  });
}

const MAX_SUGGESTIONS = 50;

/** A long cycle keeps its two ends readable: a → b → … (n more) … → y → a. */
function abbreviate(names: string[]): string[] {
  if (names.length <= 21) return names;
  return [...names.slice(0, 10), `… (${names.length - 20} more)`, ...names.slice(-10)];
}

interface Edge {
  to: number;
  path: string;
}

/**
 * Reports each strongly connected component of the depends_on graph once, with one concrete
 * cycle through it (shortest from the component's first task), so a tangle of many edges gives
 * one readable message instead of dozens.
 */
function findCycles(
  spec: DagSpec,
  firstIndex: Map<string, number>,
  skip: (p: string) => boolean,
): SemanticIssue[] {
  const n = spec.tasks.length;
  const adj: Edge[][] = spec.tasks.map(() => []);
  spec.tasks.forEach((task, i) => {
    if (firstIndex.get(task.task_id) !== i) return;
    const depsPath = childPath(indexPath('tasks', i), 'depends_on');
    const seen = new Set<string>();
    task.depends_on.forEach((dep, j) => {
      const path = indexPath(depsPath, j);
      const to = firstIndex.get(dep);
      if (to === undefined || seen.has(dep) || skip(path)) return;
      seen.add(dep);
      adj[i]!.push({ to, path });
    });
  });

  // Tarjan's SCC, iterative so a long chain of tasks cannot overflow the call stack.
  const index = new Array<number>(n).fill(-1);
  const low = new Array<number>(n).fill(0);
  const onStack = new Array<boolean>(n).fill(false);
  const stack: number[] = [];
  const comps: number[][] = [];
  let counter = 0;
  for (let root = 0; root < n; root++) {
    if (index[root] !== -1) continue;
    const work: Array<{ v: number; e: number }> = [{ v: root, e: 0 }];
    index[root] = low[root] = counter++;
    stack.push(root);
    onStack[root] = true;
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      const edges = adj[frame.v]!;
      if (frame.e < edges.length) {
        const w = edges[frame.e++]!.to;
        if (index[w] === -1) {
          index[w] = low[w] = counter++;
          stack.push(w);
          onStack[w] = true;
          work.push({ v: w, e: 0 });
        } else if (onStack[w]) {
          low[frame.v] = Math.min(low[frame.v]!, index[w]!);
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low[parent.v] = Math.min(low[parent.v]!, low[frame.v]!);
      if (low[frame.v] === index[frame.v]) {
        const comp: number[] = [];
        let w: number;
        do {
          w = stack.pop()!;
          onStack[w] = false;
          comp.push(w);
        } while (w !== frame.v);
        const selfLoop = comp.length === 1 && adj[frame.v]!.some((e) => e.to === frame.v);
        if (comp.length > 1 || selfLoop) comps.push(comp);
      }
    }
  }

  const issues: SemanticIssue[] = [];
  for (const comp of comps) {
    const members = new Set(comp);
    const start = Math.min(...comp);
    // BFS for the shortest way back to `start` inside the component.
    const prev = new Map<number, { from: number; edge: Edge }>();
    const queue: number[] = [start];
    let closing: { from: number; edge: Edge } | undefined;
    for (let head = 0; head < queue.length && !closing; head++) {
      const v = queue[head]!;
      for (const edge of adj[v]!) {
        if (!members.has(edge.to)) continue;
        if (edge.to === start) {
          closing = { from: v, edge };
          break;
        }
        if (!prev.has(edge.to)) {
          prev.set(edge.to, { from: v, edge });
          queue.push(edge.to);
        }
      }
    }
    if (!closing) continue; // unreachable: every SCC member reaches every other
    const chain: number[] = [start];
    let firstEdge = closing.edge;
    for (let v = closing.from; v !== start;) {
      chain.push(v);
      const step = prev.get(v)!;
      firstEdge = step.edge;
      v = step.from;
    }
    const names = [start, ...chain.slice(1).reverse(), start].map((k) => spec.tasks[k]!.task_id);
    const firstHop = names[1]!;
    const startName = names[0]!;
    issues.push({
      code: C.CYCLE,
      severity: 'error',
      path: firstEdge.path,
      message:
        names.length === 2
          ? `task "${startName}" depends on itself`
          : `depends_on forms a cycle: ${abbreviate(names).join(' → ')} (each arrow points from a task to a task it depends on)`,
      hint:
        names.length === 2
          ? `remove "${startName}" from its own depends_on`
          : `remove one dependency of the cycle, e.g. "${firstHop}" from the depends_on of "${startName}"`,
    });
  }
  return issues;
}
