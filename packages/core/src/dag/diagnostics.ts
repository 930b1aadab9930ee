/**
 * Stable diagnostic codes of the DAG compiler. Scripts and docs (docs/authoring.md) key on
 * these strings, so a code is never renamed or reused for a different problem.
 */
export const DAG_ERROR_CODES = {
  /** The text is not valid YAML (or holds more than one document, or an unknown alias). */
  YAML_SYNTAX: 'LF_YAML_SYNTAX',
  /** The same key appears twice in one mapping. */
  YAML_DUPLICATE_KEY: 'LF_YAML_DUPLICATE_KEY',
  /** Aliases expand past the safety limit (a "billion laughs" file) or refer to themselves. */
  YAML_ALIAS_LIMIT: 'LF_YAML_ALIAS_LIMIT',
  /** Warning passed through from the YAML parser (for example an unknown `!tag`). */
  YAML_WARNING: 'LF_YAML_WARNING',
  /** Wrong type, missing required key, unknown key, value out of range. */
  SCHEMA: 'LF_DAG_SCHEMA',
  /** dag_id, task_id, variable key or connection id does not match the id pattern. */
  BAD_ID: 'LF_DAG_BAD_ID',
  DUPLICATE_TASK: 'LF_DAG_DUPLICATE_TASK',
  UNKNOWN_UPSTREAM: 'LF_DAG_UNKNOWN_UPSTREAM',
  CYCLE: 'LF_DAG_CYCLE',
  BAD_CRON: 'LF_DAG_BAD_CRON',
  UNKNOWN_TIMEZONE: 'LF_DAG_UNKNOWN_TIMEZONE',
  BAD_DATE: 'LF_DAG_BAD_DATE',
  /** An author env key starting with LEOFLOW_ (any case): that namespace belongs to the agent. */
  RESERVED_ENV: 'LF_DAG_RESERVED_ENV',
  /** An env key that is not a portable variable name, or a value holding a NUL byte. */
  BAD_ENV: 'LF_DAG_BAD_ENV',
  SCRIPT_NOT_FOUND: 'LF_DAG_SCRIPT_NOT_FOUND',
  /** `script:` is absolute or climbs out of the DAG folder. */
  BAD_SCRIPT_PATH: 'LF_DAG_BAD_SCRIPT_PATH',
  /**
   * A DAG file (leoflow.yaml or a `script:`) resolves outside the DAG folder: a symlink, or a
   * path through a symlinked directory, to a file elsewhere. It is never read.
   */
  FILE_OUTSIDE_FOLDER: 'LF_DAG_FILE_OUTSIDE_FOLDER',
  /** A DAG file is larger than the per-file limit (docs/authoring.md); checked before reading. */
  FILE_TOO_LARGE: 'LF_DAG_FILE_TOO_LARGE',
  /** A DAG file is not a regular file (a FIFO, device or directory), or changed while read. */
  FILE_NOT_REGULAR: 'LF_DAG_FILE_NOT_REGULAR',
  COMMAND_AND_SCRIPT: 'LF_DAG_COMMAND_AND_SCRIPT',
  /** The same name listed twice in tags / depends_on / variables / connections. */
  DUPLICATE_DECLARATION: 'LF_DAG_DUPLICATE_DECLARATION',
  /** Warning: a number or boolean env value was turned into a string. */
  ENV_COERCED: 'LF_DAG_ENV_COERCED',
  /** Warning: an explicitly empty task list inherits the DAG-level declaration. */
  EMPTY_DECLARATION_INHERITS: 'LF_DAG_EMPTY_DECLARATION_INHERITS',
  /** A task's `kubernetes:` or `executor:` value is malformed (unknown key, bad name or quantity). */
  KUBERNETES: 'LF_DAG_KUBERNETES',
  /**
   * A task's Kubernetes choice is outside its tenant's operator allowlist (image, service
   * account, resource ceiling), or it names an executor this control plane does not run.
   * Checked at registration, where the tenant is known.
   */
  KUBERNETES_NOT_ALLOWED: 'LF_DAG_KUBERNETES_NOT_ALLOWED',
  /**
   * A task's `runner_labels` is malformed (not a map of label names to values), or it is given
   * to a task that does not choose `executor: runner`.
   */
  RUNNER_LABELS: 'LF_DAG_RUNNER_LABELS',
  /** Warning: catchup is on but there is no start_date to catch up from. */
  CATCHUP_WITHOUT_START: 'LF_DAG_CATCHUP_WITHOUT_START',
  /**
   * A setup/teardown declaration that cannot hold: a task both setup and teardown, `setups` or
   * on_failure_fail_dagrun on a task that is not a teardown, a `setups` entry that is not a setup
   * task, a teardown with another trigger rule than all_done_setup_success.
   */
  SETUP_TEARDOWN: 'LF_DAG_SETUP_TEARDOWN',
  /**
   * A branch or short_circuit declaration that cannot hold: both on one task, an exit code that
   * is not 0-255, a branch target that is not a task or task group of the DAG, do_xcom_push:
   * false on a task whose return value decides.
   */
  BRANCH: 'LF_DAG_BRANCH',
  /**
   * A mapped task (`expand`) that cannot be expanded: a name that is not an env name or is also
   * in `env`, a value that is neither a list nor `{xcom: task}`, an upstream that pushes no
   * return value, max_map_length without expand, a mapped setup/teardown/branch.
   */
  EXPAND: 'LF_DAG_EXPAND',
  /** A mapped task's literal lists expand past its max_map_length. */
  EXPAND_TOO_LONG: 'LF_DAG_EXPAND_TOO_LONG',
  /**
   * A task group that cannot hold: a group id that is not an id, used twice or equal to a task
   * id, a group without tasks, an item that is both a task and a group.
   */
  TASK_GROUP: 'LF_DAG_TASK_GROUP',
} as const;

export type DagErrorCode = (typeof DAG_ERROR_CODES)[keyof typeof DAG_ERROR_CODES];

export interface CompileDiagnostic {
  code: string;
  severity: 'error' | 'warning';
  message: string;
  file: string;
  /** 1-based */
  line: number;
  /** 1-based */
  column: number;
  /** YAML path like tasks[2].depends_on[0]; '' for the document as a whole */
  path: string;
  /** what to write instead */
  hint: string;
}

/**
 * `leoflow.yaml:12:7 LF_DAG_CYCLE tasks[2].depends_on[0]: <message>\n  hint: <hint>`.
 * Warnings carry a `warning` marker before the code so a terminal reader can tell them apart.
 */
export function formatDiagnostic(d: CompileDiagnostic): string {
  const where = `${d.file}:${d.line}:${d.column}`;
  const code = d.severity === 'warning' ? `warning ${d.code}` : d.code;
  const head = d.path
    ? `${where} ${code} ${d.path}: ${d.message}`
    : `${where} ${code}: ${d.message}`;
  return d.hint ? `${head}\n  hint: ${d.hint}` : head;
}

/** Edit distance (insert, delete, substitute; each costs 1). */
export function levenshtein(a: string, b: string): number {
  if (a === b) return 0;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const sub = prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      cur.push(Math.min(prev[j]! + 1, cur[j - 1]! + 1, sub));
    }
    prev = cur;
  }
  return prev[b.length]!;
}

/**
 * The candidate the author most plausibly meant, or undefined when nothing is close enough to
 * be a typo (a wild guess is worse than listing the valid choices).
 */
export function didYouMean(input: string, candidates: Iterable<string>): string | undefined {
  const lower = input.toLowerCase();
  let best: string | undefined;
  let bestDist = Infinity;
  for (const c of candidates) {
    if (c.toLowerCase() === lower) return c;
    // Too different in length to be a typo: skip the quadratic distance computation.
    if (
      Math.abs(c.length - input.length) >
      Math.max(1, Math.floor(Math.max(c.length, input.length) / 3))
    )
      continue;
    const d = levenshtein(lower, c.toLowerCase());
    if (d < bestDist) {
      bestDist = d;
      best = c;
    }
  }
  if (best === undefined) return undefined;
  const limit = Math.max(1, Math.floor(Math.max(input.length, best.length) / 3));
  return bestDist <= limit ? best : undefined;
}

const SIMPLE_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Appends a mapping key to a YAML path (`a.b`, or `a["odd key"]` when the key is not simple). */
export function childPath(parent: string, key: string): string {
  if (!SIMPLE_KEY.test(key)) return `${parent}[${JSON.stringify(key)}]`;
  return parent ? `${parent}.${key}` : key;
}

export function indexPath(parent: string, index: number): string {
  return `${parent}[${index}]`;
}

/** True when `path` is `prefix` itself or lies inside it. */
export function pathWithin(path: string, prefix: string): boolean {
  if (prefix === '') return true;
  if (!path.startsWith(prefix)) return false;
  const next = path.charAt(prefix.length);
  return next === '' || next === '.' || next === '[';
}
