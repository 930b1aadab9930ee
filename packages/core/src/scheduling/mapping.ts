import { DEFAULT_MAX_MAP_LENGTH, type DagSpec, type TaskSpecDef } from '../dag/spec.js';

/**
 * Dynamic task mapping (Airflow's `expand`): a mapped task becomes one task instance per element
 * of its list — of the product of its lists, for several arguments, the last argument varying
 * fastest (Airflow's DictOfListsExpandInput). Each index gets its arguments as environment
 * variables, so the task reads `$FILE` whatever its type.
 */

export type MapLengthCheck =
  | { ok: true; values: unknown[] }
  | { ok: false; code: 'LF_MAP_NOT_A_LIST' | 'LF_MAP_TOO_LONG'; message: string };

/** The list a return value holds, for a task that maps over it (a JSON list, at most `max` long). */
export function mappableList(text: string, max: number, upstream: string): MapLengthCheck {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    v = undefined;
  }
  if (!Array.isArray(v)) {
    return {
      ok: false,
      code: 'LF_MAP_NOT_A_LIST',
      message: `a task maps over the return value of "${upstream}", which must be a JSON list (print e.g. ["a.csv", "b.csv"] as its last stdout line)`,
    };
  }
  if (v.length > max) {
    return {
      ok: false,
      code: 'LF_MAP_TOO_LONG',
      message: `the return value of "${upstream}" is a list of ${v.length} elements; a task mapped over it expands to at most ${max} (max_map_length)`,
    };
  }
  return { ok: true, values: v };
}

/** A task's max_map_length, its default applied. */
export function maxMapLength(task: Pick<TaskSpecDef, 'max_map_length'>): number {
  return task.max_map_length ?? DEFAULT_MAX_MAP_LENGTH;
}

/**
 * The tightest max_map_length among the tasks that map over `taskId`'s return value, or
 * undefined when none does (its push is then not checked).
 */
export function mappedConsumersLimit(spec: DagSpec, taskId: string): number | undefined {
  let limit: number | undefined;
  for (const t of spec.tasks) {
    if (t.expand?.some((a) => 'xcom' in a && a.xcom === taskId)) {
      const m = maxMapLength(t);
      limit = limit === undefined ? m : Math.min(limit, m);
    }
  }
  return limit;
}

/** How an element reaches the task's environment: a string as itself, anything else as JSON. */
export function mapValueEnv(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

export type Expansion =
  | { ok: true; indexes: Record<string, string>[] }
  | { ok: false; code: 'LF_MAP_TOO_LONG'; message: string };

/**
 * The environment of each map index: `lists` holds the list of each `xcom` argument (by upstream
 * task id); literal arguments carry their own. Zero elements anywhere gives zero indexes (the
 * task is then skipped, as Airflow skips a zero-length expansion).
 */
export function expandTask(
  task: Pick<TaskSpecDef, 'task_id' | 'expand' | 'max_map_length'>,
  lists: ReadonlyMap<string, readonly unknown[]>,
): Expansion {
  const args = (task.expand ?? []).map((a) => ({
    env: a.env,
    values: 'values' in a ? a.values : (lists.get(a.xcom) ?? []),
  }));
  const total = args.reduce((n, a) => n * a.values.length, args.length === 0 ? 0 : 1);
  const max = maxMapLength(task);
  if (total > max) {
    return {
      ok: false,
      code: 'LF_MAP_TOO_LONG',
      message: `task "${task.task_id}" would expand to ${total} map indexes (${args.map((a) => `${a.env}: ${a.values.length}`).join(' × ')}); its max_map_length is ${max}`,
    };
  }
  const indexes: Record<string, string>[] = [];
  for (let i = 0; i < total; i++) {
    const env: Record<string, string> = {};
    let rest = i;
    for (let k = args.length - 1; k >= 0; k--) {
      const a = args[k]!;
      env[a.env] = mapValueEnv(a.values[rest % a.values.length]);
      rest = Math.floor(rest / a.values.length);
    }
    // in the author's argument order
    indexes.push(Object.fromEntries(args.map((a) => [a.env, env[a.env]!])));
  }
  return { ok: true, indexes };
}
