import { isMap, isScalar, isSeq, parseDocument, type Document, type YAMLMap } from 'yaml';
import { parseAuthorDate } from './dates.js';
import {
  DAG_ERROR_CODES as C,
  childPath,
  didYouMean,
  indexPath,
  pathWithin,
  type CompileDiagnostic,
} from './diagnostics.js';
import { isLeoflowError } from '../errors/leoflow-error.js';
import { checkTimezone, normalizeSchedule } from './schedule.js';
import { GraphSources, type GroupCtx, type RawRef } from './graph-sources.js';
import { checkDagSemantics, suggestId } from './semantic.js';
import { checkTemplate, type StaticScope } from '../template/render.js';
import { hasTemplateSyntax } from '../template/parse.js';
import {
  DAG_SCHEMA_VERSION,
  ID_PATTERN,
  MAX_MAP_LENGTH_CEILING,
  TASK_TYPES,
  TRIGGER_RULES,
  type DagSpec,
  type ExpandArg,
  type TaskDefaults,
  type TaskSpecDef,
  type TaskType,
  type TriggerRule,
} from './spec.js';
import {
  buildAliasTable,
  deref,
  describe,
  encloses,
  expandedSize,
  isMergeKey,
  isNullish,
  isYamlNode,
  keyText,
  numberOrBoolText,
  pathAtOffset,
  startOffset,
  type AliasTable,
  type MapEntry,
  type YamlNode,
} from './yaml-nodes.js';

export type CompileResult =
  | { ok: true; spec: DagSpec; warnings: CompileDiagnostic[] }
  | { ok: false; errors: CompileDiagnostic[]; warnings: CompileDiagnostic[] };

export interface CompileInput {
  /** the leoflow.yaml text */
  text: string;
  /** shown in diagnostics, e.g. "dags/etl/leoflow.yaml" */
  fileName: string;
  /** basename of the DAG folder; the default dag_id */
  dirName: string;
  /**
   * reads a file relative to the DAG folder; undefined when it does not exist. It may refuse a
   * file by throwing a LeoflowError coded LF_DAG_FILE_OUTSIDE_FOLDER / _TOO_LARGE / _NOT_REGULAR,
   * which becomes that diagnostic.
   */
  readScript: (relPath: string) => string | undefined;
}

/** Upper bound of every integer field: what a 32-bit signed database column holds. */
export const MAX_INT32 = 2147483647;
/** Size (in YAML nodes, aliases expanded) past which a file is treated as an alias bomb. */
export const MAX_EXPANDED_NODES = 1_000_000;
const MAX_PARAM_DEPTH = 32;

export const DAG_KEYS = [
  'dag_id',
  'description',
  'owner',
  'tags',
  'schedule',
  'schedule_timezone',
  'start_date',
  'end_date',
  'catchup',
  'max_active_runs',
  'max_active_tasks',
  'defaults',
  'params',
  'variables',
  'connections',
  'tasks',
] as const;

export const TASK_KEYS = [
  'task_id',
  'type',
  'command',
  'script',
  'depends_on',
  'trigger_rule',
  'retries',
  'retry_delay_seconds',
  'execution_timeout_seconds',
  'env',
  'variables',
  'connections',
  'do_xcom_push',
  'executor',
  'runner_labels',
  'kubernetes',
  'retry_exponential_backoff',
  'max_retry_delay_seconds',
  'setup',
  'teardown',
  'setups',
  'on_failure_fail_dagrun',
  'branch',
  'short_circuit',
  'expand',
  'max_map_length',
] as const;

export const DEFAULTS_KEYS = [
  'retries',
  'retry_delay_seconds',
  'execution_timeout_seconds',
  'retry_exponential_backoff',
  'max_retry_delay_seconds',
] as const;

/** The keys of a task group item (an item of `tasks:` written with `group_id:`). */
export const GROUP_KEYS = [
  'group_id',
  'tooltip',
  'prefix_group_id',
  'depends_on',
  'tasks',
] as const;

// Names authors bring from Airflow or other tools; too far from ours for edit distance to catch.
const DAG_KEY_ALIASES: Record<string, string> = {
  schedule_interval: 'schedule',
  cron: 'schedule',
  timezone: 'schedule_timezone',
  tz: 'schedule_timezone',
  default_args: 'defaults',
  concurrency: 'max_active_tasks',
  max_active_tasks_per_dag: 'max_active_tasks',
  id: 'dag_id',
  name: 'dag_id',
  start: 'start_date',
  end: 'end_date',
};
const TASK_KEY_ALIASES: Record<string, string> = {
  id: 'task_id',
  name: 'task_id',
  upstream: 'depends_on',
  upstreams: 'depends_on',
  dependencies: 'depends_on',
  deps: 'depends_on',
  needs: 'depends_on',
  after: 'depends_on',
  bash_command: 'command',
  cmd: 'command',
  run: 'command',
  script_path: 'script',
  file: 'script',
  timeout: 'execution_timeout_seconds',
  execution_timeout: 'execution_timeout_seconds',
  retry_delay: 'retry_delay_seconds',
  environment: 'env',
  xcom_push: 'do_xcom_push',
  operator: 'type',
  kind: 'type',
  max_retry_delay: 'max_retry_delay_seconds',
  exponential_backoff: 'retry_exponential_backoff',
  is_setup: 'setup',
  is_teardown: 'teardown',
  as_setup: 'setup',
  as_teardown: 'teardown',
  map: 'expand',
  expand_kwargs: 'expand',
  branch_task: 'branch',
  shortcircuit: 'short_circuit',
};

/** Airflow names with no Leoflow key of their own: the hint says what to write instead. */
const TASK_KEY_HINTS: Record<string, string> = {
  partial:
    'a mapped task\'s constant ("partial") arguments are its own keys (env:, command:, …); only expand: varies per map index',
  task_group: 'write the group as an item of tasks: with group_id: and its own tasks: list',
  group: 'write the group as an item of tasks: with group_id: and its own tasks: list',
};

const TRUTHY_WORDS = ['yes', 'y', 'on', 'true'];
const FALSY_WORDS = ['no', 'n', 'off', 'false'];

/**
 * Compiles a leoflow.yaml into the DagSpec that `dag.json` holds. Pure: the only input/output
 * is through the arguments, so the CLI, the server's DAG-folder watcher and tests share it.
 * Reports every problem it can find in one pass, each with a position and a fix.
 */
export function compileDagYaml(input: CompileInput): CompileResult {
  try {
    return new Compiler(input).run();
  } catch (e) {
    // The yaml parser recurses once per nesting level; thousands of levels overflow the stack.
    if (e instanceof RangeError && /call stack/i.test(e.message)) {
      const error: CompileDiagnostic = {
        code: C.YAML_SYNTAX,
        severity: 'error',
        message: 'the file nests too deeply to be read',
        file: input.fileName,
        line: 1,
        column: 1,
        path: '',
        hint: 'leoflow.yaml needs only a few levels of indentation; flatten the nested values',
      };
      return { ok: false, errors: [error], warnings: [] };
    }
    throw e;
  }
}

class Compiler {
  /**
   * Offsets where each line starts. Computed from the text rather than with yaml's LineCounter,
   * which skips the line breaks inside a quoted scalar the parser gave up on (an unclosed quote)
   * and then reports columns past the end of the line.
   */
  private readonly lineStarts: number[];
  private readonly errors: CompileDiagnostic[] = [];
  private readonly warnings: CompileDiagnostic[] = [];
  /** where each path's value (and, for mapping entries, key) was written */
  private readonly valueLocs = new Map<string, unknown>();
  private readonly keyLocs = new Map<string, YamlNode>();
  /** paths already reported structurally; semantic checks stay quiet inside them */
  private readonly invalid = new Set<string>();
  private doc!: Document.Parsed;
  private aliases: AliasTable = new Map();
  /** the DAG's task groups and where each task and dependency was written (see resolveGraph) */
  private readonly shape = new GraphSources();

  constructor(private readonly input: CompileInput) {
    this.lineStarts = [0];
    const text = input.text;
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1))
      this.lineStarts.push(i + 1);
  }

  private linePos(offset: number): { line: number; column: number } {
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - this.lineStarts[lo]! + 1 };
  }

  run(): CompileResult {
    const doc = parseDocument(this.input.text, {
      prettyErrors: false,
      merge: true,
      uniqueKeys: true,
      strict: true,
    });
    this.doc = doc;

    for (const e of doc.errors) {
      const offset = e.pos[0];
      if (e.code === 'DUPLICATE_KEY') {
        const path = pathAtOffset(doc.contents, offset);
        this.diag(
          'error',
          C.YAML_DUPLICATE_KEY,
          offset,
          path,
          `key "${lastSegment(path)}" appears twice in the same mapping`,
          'keep one of the two entries; YAML does not merge repeated keys',
        );
      } else if (e.code === 'MULTIPLE_DOCS') {
        this.diag(
          'error',
          C.YAML_SYNTAX,
          offset,
          '',
          'the file holds more than one YAML document (a second "---")',
          'keep one DAG per leoflow.yaml; remove the extra "---" and what follows, or move it to its own folder',
        );
      } else {
        this.diag(
          'error',
          C.YAML_SYNTAX,
          offset,
          pathAtOffset(doc.contents, offset),
          e.message,
          syntaxHint(e.code),
        );
      }
    }
    for (const w of doc.warnings) {
      this.diag(
        'warning',
        C.YAML_WARNING,
        w.pos[0],
        pathAtOffset(doc.contents, w.pos[0]),
        w.message,
        w.code === 'TAG_RESOLVE_FAILED'
          ? 'remove the custom tag; leoflow.yaml uses plain YAML 1.2 values'
          : 'adjust the YAML near this position; the value is used as the parser read it',
      );
    }
    // A damaged AST yields misleading follow-up errors; fix the syntax first.
    if (this.errors.length > 0) return this.finish(undefined);

    this.aliases = buildAliasTable(doc);
    if (!this.checkAliases()) return this.finish(undefined);

    const draft = this.compileRoot(doc.contents);
    if (draft) {
      const src = (p: string): string => this.sourcePath(draft, p);
      for (const issue of checkDagSemantics(draft, (p) => this.isInvalid(src(p)))) {
        const path = src(issue.path);
        const node = issue.atKey
          ? (this.keyLocs.get(path) ?? this.locate(path))
          : this.locate(path);
        this.diag(issue.severity, issue.code, startOffset(node), path, issue.message, issue.hint);
      }
    }
    return this.finish(draft);
  }

  // ---- diagnostics -------------------------------------------------------------------------

  private diag(
    severity: 'error' | 'warning',
    code: string,
    offset: number,
    path: string,
    message: string,
    hint: string,
  ): void {
    const pos = this.linePos(offset);
    const d: CompileDiagnostic = {
      code,
      severity,
      message,
      file: this.input.fileName,
      line: pos.line,
      column: pos.column,
      path,
      hint,
    };
    (severity === 'error' ? this.errors : this.warnings).push(d);
  }

  private error(code: string, node: unknown, path: string, message: string, hint: string): void {
    this.invalid.add(path);
    this.diag('error', code, startOffset(node), path, message, hint);
  }

  private schemaError(node: unknown, path: string, message: string, hint: string): void {
    this.error(C.SCHEMA, node, path, message, hint);
  }

  /**
   * Where a compiled-spec path (`tasks[3].expand[0].xcom`) was written in the file
   * (`tasks[1].tasks[0].expand.FILE.xcom`): task groups nest tasks, and an expand argument is a
   * mapping entry in the file but a list item in the spec.
   */
  private sourcePath(spec: DagSpec, path: string): string {
    let p = path;
    const arg = /^(tasks\[(\d+)\])\.expand\[(\d+)\](.*)$/s.exec(p);
    if (arg) {
      const a = spec.tasks[Number(arg[2])]?.expand?.[Number(arg[3])];
      if (a !== undefined) {
        const rest = (arg[4] ?? '').replace(/^\.values(?=\[|$)/, '');
        p = `${childPath(`${arg[1]}.expand`, a.env)}${rest}`;
      }
    }
    return this.shape.sourcePath(p);
  }

  private isInvalid(path: string): boolean {
    for (const p of this.invalid) if (pathWithin(path, p)) return true;
    return false;
  }

  /** The node written at `path`, or at its nearest recorded ancestor. */
  private locate(path: string): unknown {
    for (let p = path; ;) {
      const node = this.valueLocs.get(p);
      if (node !== undefined && node !== null) return node;
      const cut = Math.max(p.lastIndexOf('.'), p.lastIndexOf('['));
      if (cut <= 0) return this.doc.contents ?? undefined;
      p = p.slice(0, cut);
    }
  }

  private finish(draft: DagSpec | undefined): CompileResult {
    const byPos = (a: CompileDiagnostic, b: CompileDiagnostic): number =>
      a.line - b.line || a.column - b.column;
    this.errors.sort(byPos);
    this.warnings.sort(byPos);
    if (this.errors.length > 0 || !draft) {
      return { ok: false, errors: this.errors, warnings: this.warnings };
    }
    return { ok: true, spec: draft, warnings: this.warnings };
  }

  // ---- aliases -----------------------------------------------------------------------------

  private checkAliases(): boolean {
    const doc = this.doc;
    let ok = true;
    let firstAlias: YamlNode | undefined;
    for (const [alias, target] of this.aliases) {
      firstAlias ??= alias;
      const path = (): string => pathAtOffset(doc.contents, startOffset(alias));
      if (!target) {
        ok = false;
        this.diag(
          'error',
          C.YAML_SYNTAX,
          startOffset(alias),
          path(),
          `alias *${alias.source} refers to no anchor`,
          `define the anchor first (&${alias.source}) above this line, or fix the name`,
        );
      } else if (encloses(target, alias)) {
        ok = false;
        this.diag(
          'error',
          C.YAML_ALIAS_LIMIT,
          startOffset(alias),
          path(),
          `alias *${alias.source} is inside the node it refers to, which would make it infinitely deep`,
          'copy the values instead of referring to the enclosing anchor',
        );
      }
    }
    if (!ok || !firstAlias) return ok;
    // yaml's own guard (toJS maxAliasCount) counts alias uses, so a DAG of 101 tasks that all
    // write `env: *common` would trip it; the expanded size is what an attack inflates.
    const size = expandedSize(this.aliases, doc.contents);
    if (size > MAX_EXPANDED_NODES) {
      this.diag(
        'error',
        C.YAML_ALIAS_LIMIT,
        startOffset(firstAlias),
        pathAtOffset(doc.contents, startOffset(firstAlias)),
        `aliases expand the file to ${size.toExponential(1)} YAML nodes (limit ${MAX_EXPANDED_NODES.toLocaleString('en-US')}); it looks like an alias bomb`,
        'write the values out instead of nesting aliases of aliases',
      );
      return false;
    }
    return true;
  }

  // ---- generic readers ----------------------------------------------------------------------

  private record(path: string, raw: unknown): void {
    if (raw !== undefined && raw !== null) this.valueLocs.set(path, raw);
  }

  /**
   * Entries of a mapping with aliases and merge keys (`<<: *base`) resolved. Explicit keys win
   * over merged ones; among merged sources the first listed wins, as the YAML merge spec says.
   */
  private mapEntries(
    raw: unknown,
    path: string,
    what: string,
  ): { node: YAMLMap; entries: MapEntry[] } | undefined {
    this.record(path, raw);
    const node = deref(this.aliases, raw);
    if (!isMap(node)) {
      this.schemaError(
        raw,
        path,
        `${what} must be a mapping (key: value lines), not ${describe(this.aliases, raw)}`,
        mappingHint(path),
      );
      return undefined;
    }
    return { node, entries: this.collectEntries(node, path) };
  }

  private collectEntries(node: YAMLMap, path: string): MapEntry[] {
    const explicit = new Set<string>();
    for (const pair of node.items) {
      if (!isMergeKey(pair.key)) {
        const k = keyText(pair.key);
        if (k !== undefined) explicit.add(k);
      }
    }
    const out: MapEntry[] = [];
    const taken = new Set<string>();
    for (const pair of node.items) {
      if (isMergeKey(pair.key)) {
        for (const src of this.mergeSources(pair.value, childPath(path, '<<'))) {
          for (const e of this.collectEntries(src, path)) {
            if (explicit.has(e.key) || taken.has(e.key)) continue;
            taken.add(e.key);
            out.push(e);
          }
        }
        continue;
      }
      const k = keyText(pair.key);
      if (k === undefined) {
        this.schemaError(
          pair.key,
          path,
          `mapping keys must be plain names, not ${describe(this.aliases, pair.key)}`,
          'write the key as a plain word, e.g. my_key: value',
        );
        continue;
      }
      taken.add(k);
      out.push({ key: k, keyNode: pair.key as YamlNode, value: pair.value });
    }
    return out;
  }

  private mergeSources(raw: unknown, path: string): YAMLMap[] {
    const node = deref(this.aliases, raw);
    const items = isSeq(node) ? node.items : [raw];
    const maps: YAMLMap[] = [];
    for (const item of items) {
      const m = deref(this.aliases, item);
      if (isMap(m)) maps.push(m);
      else {
        this.schemaError(
          item,
          path,
          `a merge key (<<) takes a mapping or a list of mappings, not ${describe(this.aliases, item)}`,
          'write <<: *anchor_of_a_mapping',
        );
      }
    }
    return maps;
  }

  private checkKeys(
    entries: MapEntry[],
    path: string,
    allowed: readonly string[],
    aliases: Record<string, string>,
    misplaced: (key: string) => string | undefined,
    ignore: (key: string) => boolean = () => false,
  ): Map<string, MapEntry> {
    const known = new Map<string, MapEntry>();
    for (const e of entries) {
      const p = childPath(path, e.key);
      if (allowed.includes(e.key)) {
        known.set(e.key, e);
        this.keyLocs.set(p, e.keyNode);
        this.record(p, e.value ?? e.keyNode);
        continue;
      }
      if (ignore(e.key)) continue;
      const alias = aliases[e.key.toLowerCase()];
      const guess =
        alias !== undefined && allowed.includes(alias) ? alias : didYouMean(e.key, allowed);
      const hint =
        misplaced(e.key) ??
        (guess ? `did you mean "${guess}"?` : `allowed keys here: ${allowed.join(', ')}`);
      this.invalid.add(p);
      this.diag('error', C.SCHEMA, startOffset(e.keyNode), p, `unknown key "${e.key}"`, hint);
    }
    return known;
  }

  private readString(
    raw: unknown,
    path: string,
    opts: { nonEmpty?: boolean } = {},
  ): string | undefined {
    this.record(path, raw);
    const node = deref(this.aliases, raw);
    if (isScalar(node) && typeof node.value === 'string') {
      if (opts.nonEmpty && node.value.trim() === '') {
        this.schemaError(
          raw,
          path,
          `${lastSegment(path)} must not be empty`,
          `write a value for ${lastSegment(path)}, or remove the key`,
        );
        return undefined;
      }
      return node.value;
    }
    const key = lastSegment(path);
    const literal = numberOrBoolText(node);
    const hint =
      literal !== undefined ? `quote it: ${key}: "${literal}"` : `write ${key}: "some text"`;
    this.schemaError(
      raw,
      path,
      `${key} must be a string, not ${describe(this.aliases, raw)}`,
      hint,
    );
    return undefined;
  }

  private readInt(raw: unknown, path: string, min: number, max: number): number | undefined {
    this.record(path, raw);
    const node = deref(this.aliases, raw);
    const key = lastSegment(path);
    const range = max === MAX_INT32 ? `an integer ≥ ${min}` : `an integer from ${min} to ${max}`;
    if (isScalar(node) && typeof node.value === 'number' && Number.isInteger(node.value)) {
      if (node.value < min || node.value > max) {
        this.schemaError(
          raw,
          path,
          `${key} is ${node.source ?? node.value}, but must be ${range}`,
          `write ${key}: ${node.value < min ? min : max}`,
        );
        return undefined;
      }
      return node.value;
    }
    let hint = `write ${key}: ${min}`;
    if (isScalar(node) && typeof node.value === 'string' && /^\s*-?\d+\s*$/.test(node.value)) {
      hint = `remove the quotes: ${key}: ${node.value.trim()}`;
    }
    this.schemaError(
      raw,
      path,
      `${key} must be ${range}, not ${describe(this.aliases, raw)}`,
      hint,
    );
    return undefined;
  }

  private readBool(raw: unknown, path: string): boolean | undefined {
    this.record(path, raw);
    const node = deref(this.aliases, raw);
    if (isScalar(node) && typeof node.value === 'boolean') return node.value;
    const key = lastSegment(path);
    let hint = `write ${key}: true or ${key}: false`;
    if (isScalar(node) && typeof node.value === 'string') {
      const w = node.value.trim().toLowerCase();
      if (TRUTHY_WORDS.includes(w))
        hint = `write ${key}: true (YAML 1.2 reads "${node.value}" as a string)`;
      if (FALSY_WORDS.includes(w))
        hint = `write ${key}: false (YAML 1.2 reads "${node.value}" as a string)`;
    }
    this.schemaError(
      raw,
      path,
      `${key} must be true or false, not ${describe(this.aliases, raw)}`,
      hint,
    );
    return undefined;
  }

  private readEnum<T extends string>(
    raw: unknown,
    path: string,
    allowed: readonly T[],
  ): T | undefined {
    const s = this.readString(raw, path);
    if (s === undefined) return undefined;
    if ((allowed as readonly string[]).includes(s)) return s as T;
    const key = lastSegment(path);
    const guess = didYouMean(s, allowed);
    this.schemaError(
      raw,
      path,
      `${key} "${s}" is not one of ${allowed.join(', ')}`,
      guess ? `did you mean ${key}: ${guess}?` : `write one of: ${allowed.join(', ')}`,
    );
    return undefined;
  }

  /** A list of names. Items keep their index (bad ones as "") so later paths stay aligned. */
  private readStringList(raw: unknown, path: string, what: string): string[] | undefined {
    this.record(path, raw);
    if (isNullish(this.aliases, raw)) return [];
    const node = deref(this.aliases, raw);
    const key = lastSegment(path);
    if (!isSeq(node)) {
      const hint =
        isScalar(node) && typeof node.value === 'string'
          ? `write a list: ${key}: [${node.value}]`
          : `write a list: ${key}: [a, b]`;
      this.schemaError(
        raw,
        path,
        `${key} must be a list of ${what}, not ${describe(this.aliases, raw)}`,
        hint,
      );
      return undefined;
    }
    return node.items.map((item, i) => {
      const p = indexPath(path, i);
      this.record(p, item);
      const n = deref(this.aliases, item);
      if (isScalar(n) && typeof n.value === 'string') return n.value;
      const literal = numberOrBoolText(n);
      const hint =
        literal !== undefined
          ? `quote it: "${literal}"`
          : `write each ${what.replace(/s$/, '')} as a plain string`;
      this.schemaError(
        item,
        p,
        `each item of ${key} must be a string, not ${describe(this.aliases, item)}`,
        hint,
      );
      return '';
    });
  }

  private readEnv(raw: unknown, path: string): Record<string, string> {
    const env: Record<string, string> = {};
    if (isNullish(this.aliases, raw)) {
      this.record(path, raw);
      return env;
    }
    const m = this.mapEntries(raw, path, 'env');
    if (!m) return env;
    for (const e of m.entries) {
      const p = childPath(path, e.key);
      this.keyLocs.set(p, e.keyNode);
      this.record(p, e.value ?? e.keyNode);
      const n = deref(this.aliases, e.value);
      if (isScalar(n) && typeof n.value === 'string') {
        setOwn(env, e.key, n.value);
      } else if (isScalar(n) && (typeof n.value === 'number' || typeof n.value === 'boolean')) {
        // The source spelling, not String(value): `VERSION: 1.10` must not become "1.1".
        const text = n.source ?? String(n.value);
        setOwn(env, e.key, text);
        this.diag(
          'warning',
          C.ENV_COERCED,
          startOffset(e.value),
          p,
          `env value ${e.key}: ${text} is a ${typeof n.value}; it is passed as the string "${text}"`,
          `quote it to make that explicit: ${e.key}: "${text}"`,
        );
      } else {
        setOwn(env, e.key, '');
        const hint = isNullish(this.aliases, e.value)
          ? `write ${e.key}: "" for an empty value`
          : `write ${e.key}: "text" (env values are strings)`;
        this.schemaError(
          e.value ?? e.keyNode,
          p,
          `env value of ${e.key} must be a string, not ${describe(this.aliases, e.value)}`,
          hint,
        );
      }
    }
    return env;
  }

  private readJson(raw: unknown, path: string, depth: number): unknown {
    this.record(path, raw);
    const n = deref(this.aliases, raw);
    if (n === null || n === undefined) return null;
    if (depth > MAX_PARAM_DEPTH) {
      this.schemaError(
        raw,
        path,
        `params nest deeper than ${MAX_PARAM_DEPTH} levels`,
        'flatten the structure',
      );
      return null;
    }
    if (isMap(n)) {
      const out: Record<string, unknown> = {};
      for (const e of this.collectEntries(n, path)) {
        const p = childPath(path, e.key);
        this.keyLocs.set(p, e.keyNode);
        setOwn(out, e.key, this.readJson(e.value, p, depth + 1));
      }
      return out;
    }
    if (isSeq(n))
      return n.items.map((item, i) => this.readJson(item, indexPath(path, i), depth + 1));
    if (isScalar(n)) {
      const v = n.value;
      if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
      if (typeof v === 'number' && Number.isFinite(v)) return v;
      this.schemaError(
        raw,
        path,
        `${describe(this.aliases, raw)} cannot be stored in JSON`,
        typeof v === 'number' ? `quote it: "${n.source ?? String(v)}"` : 'use a string instead',
      );
      return null;
    }
    return null;
  }

  // ---- the DAG --------------------------------------------------------------------------------

  private compileRoot(root: unknown): DagSpec | undefined {
    if (isNullish(this.aliases, root)) {
      this.diag(
        'error',
        C.SCHEMA,
        0,
        '',
        'leoflow.yaml is empty',
        'start with:\n    tasks:\n      - task_id: hello\n        command: echo hello',
      );
      return undefined;
    }
    const top = this.mapEntries(root, '', 'leoflow.yaml');
    if (!top) return undefined;
    const keys = this.checkKeys(
      top.entries,
      '',
      DAG_KEYS,
      DAG_KEY_ALIASES,
      (k) =>
        (DEFAULTS_KEYS as readonly string[]).includes(k)
          ? `${k} is a task setting; set it for every task under defaults:, or on each task`
          : (TASK_KEYS as readonly string[]).includes(k)
            ? `${k} is a task key; put it on a task under tasks:`
            : undefined,
      // x-* keys are scratch space for YAML anchors shared by tasks (as in docker-compose).
      (k) => k.startsWith('x-'),
    );
    const get = (k: (typeof DAG_KEYS)[number]): unknown => {
      const e = keys.get(k);
      return e === undefined || isNullish(this.aliases, e.value) ? undefined : e.value;
    };
    const has = (k: (typeof DAG_KEYS)[number]): boolean => get(k) !== undefined;

    let dagId = this.input.dirName;
    if (has('dag_id')) {
      dagId = this.readString(get('dag_id'), 'dag_id') ?? '';
    } else if (!ID_PATTERN.test(dagId)) {
      this.error(
        C.BAD_ID,
        top.node,
        'dag_id',
        `no dag_id is set and the folder name "${dagId}" is not a valid id`,
        `add "dag_id: ${suggestId(dagId)}" at the top of the file, or rename the folder`,
      );
    }

    const str = (k: 'description' | 'owner'): string =>
      has(k) ? (this.readString(get(k), k) ?? '') : '';

    let timezone = 'UTC';
    if (has('schedule_timezone')) {
      const tz = this.readString(get('schedule_timezone'), 'schedule_timezone');
      if (tz !== undefined) {
        const r = checkTimezone(tz);
        timezone = r.ok ? r.timezone : tz;
      }
    }
    // Naive dates are read in the DAG's zone; an unknown zone is reported once, at its key.
    const dateZone = checkTimezone(timezone).ok ? timezone : 'UTC';

    let schedule: string | null = null;
    if (has('schedule')) {
      const s = this.readString(get('schedule'), 'schedule');
      if (s !== undefined) {
        const r = normalizeSchedule(s);
        schedule = r.ok ? r.schedule : s;
      }
    }

    const date = (k: 'start_date' | 'end_date'): string | null => {
      if (!has(k)) return null;
      const raw = get(k);
      this.record(k, raw);
      const node = deref(this.aliases, raw);
      // Under a `%YAML 1.1` directive the parser makes Date objects; the source text is what
      // the author wrote, so it goes through the same parser (and time-zone rule) as a string.
      const text =
        isScalar(node) && typeof node.value === 'string'
          ? node.value
          : isScalar(node) && node.value instanceof Date
            ? node.source
            : undefined;
      if (text === undefined) {
        this.schemaError(
          raw,
          k,
          `${k} must be a date such as 2026-01-01, not ${describe(this.aliases, raw)}`,
          `write ${k}: 2026-01-01 or ${k}: "2026-01-01T06:00:00Z"`,
        );
        return null;
      }
      const r = parseAuthorDate(text, dateZone);
      if (!r.ok) {
        this.error(
          C.BAD_DATE,
          raw,
          k,
          `${k}: ${r.reason}`,
          `write ${k}: 2026-01-01, ${k}: 2026-01-01T06:00:00 (read in schedule_timezone) or ${k}: 2026-01-01T06:00:00Z`,
        );
        return null;
      }
      return r.iso;
    };

    const defaults = this.compileDefaults(keys.get('defaults')?.value);
    const variables = has('variables')
      ? (this.readStringList(get('variables'), 'variables', 'variable keys') ?? [])
      : [];
    const connections = has('connections')
      ? (this.readStringList(get('connections'), 'connections', 'connection ids') ?? [])
      : [];

    const spec: DagSpec = {
      schema_version: DAG_SCHEMA_VERSION,
      dag_id: dagId,
      description: str('description'),
      owner: str('owner'),
      tags: has('tags') ? (this.readStringList(get('tags'), 'tags', 'tags') ?? []) : [],
      schedule,
      schedule_timezone: timezone,
      start_date: date('start_date'),
      end_date: date('end_date'),
      catchup: has('catchup') ? (this.readBool(get('catchup'), 'catchup') ?? false) : false,
      max_active_runs: has('max_active_runs')
        ? (this.readInt(get('max_active_runs'), 'max_active_runs', 1, MAX_INT32) ?? 16)
        : 16,
      max_active_tasks: has('max_active_tasks')
        ? (this.readInt(get('max_active_tasks'), 'max_active_tasks', 0, MAX_INT32) ?? 0)
        : 0,
      defaults,
      params: has('params') ? this.compileParams(get('params')) : {},
      variables,
      connections,
      tasks: [],
    };

    spec.tags.forEach((t, i) => {
      if (t === '' && !this.isInvalid(indexPath('tags', i))) {
        this.schemaError(
          this.valueLocs.get(indexPath('tags', i)),
          indexPath('tags', i),
          'tags must not be empty strings',
          'remove the empty tag',
        );
      }
    });

    if (!has('tasks')) {
      const node = keys.get('tasks')?.keyNode ?? top.node;
      this.schemaError(
        node,
        'tasks',
        'the DAG has no tasks: the tasks key is missing or empty',
        'add:\n    tasks:\n      - task_id: hello\n        command: echo hello',
      );
      return spec;
    }
    const tasksRaw = get('tasks');
    const tasksNode = deref(this.aliases, tasksRaw);
    if (!isSeq(tasksNode)) {
      this.schemaError(
        tasksRaw,
        'tasks',
        `tasks must be a list of tasks, not ${describe(this.aliases, tasksRaw)}`,
        isMap(tasksNode)
          ? 'start each task with "- task_id: name" (tasks is a list, not a mapping of names)'
          : 'write tasks as a list of "- task_id: ..." items',
      );
      return spec;
    }
    if (tasksNode.items.length === 0) {
      this.schemaError(
        tasksRaw,
        'tasks',
        'tasks is empty: a DAG needs at least one task',
        'add a task: - task_id: hello\n        command: echo hello',
      );
      return spec;
    }
    this.compileItems(tasksNode.items, 'tasks', null, defaults, spec);
    this.shape.resolve(spec, (code, path, message, hint) => {
      if (!this.isInvalid(path)) this.error(code, this.locate(path), path, message, hint);
    });
    return spec;
  }

  /** The items of a `tasks:` list: tasks, and task groups (items written with `group_id:`). */
  private compileItems(
    items: readonly unknown[],
    path: string,
    ctx: GroupCtx | null,
    defaults: TaskDefaults,
    spec: DagSpec,
  ): void {
    items.forEach((item, i) => {
      const itemPath = indexPath(path, i);
      const node = deref(this.aliases, item);
      const isGroup =
        isMap(node) &&
        node.items.some((pair) => !isMergeKey(pair.key) && keyText(pair.key) === 'group_id');
      if (isGroup) {
        this.compileGroup(item, itemPath, ctx, defaults, spec);
        return;
      }
      const refs: RawRef[] = [];
      const task = this.compileTask(item, itemPath, defaults, spec, ctx, refs);
      if (ctx !== null) task.group = ctx.id;
      spec.tasks.push(task);
      this.shape.taskSrc.push(itemPath);
      this.shape.taskCtx.push(ctx);
      this.shape.taskRefs.push(refs);
    });
  }

  /** A task group item (Airflow's TaskGroup): its tasks are compiled with their ids prefixed. */
  private compileGroup(
    raw: unknown,
    path: string,
    parent: GroupCtx | null,
    defaults: TaskDefaults,
    spec: DagSpec,
  ): void {
    const m = this.mapEntries(raw, path, path);
    if (!m) return;
    const taskIdEntry = m.entries.find((e) => e.key === 'task_id');
    if (taskIdEntry) {
      this.error(
        C.TASK_GROUP,
        taskIdEntry.keyNode,
        childPath(path, 'task_id'),
        'an item of tasks: is a task (task_id) or a task group (group_id), not both',
        'remove task_id to make it a group, or group_id to make it a task',
      );
    }
    const keys = this.checkKeys(
      m.entries.filter((e) => e.key !== 'task_id'),
      path,
      GROUP_KEYS,
      { id: 'group_id', name: 'group_id', task_group_id: 'group_id', children: 'tasks' },
      (k) =>
        (TASK_KEYS as readonly string[]).includes(k)
          ? `${k} is a task key; a group holds tasks, so set it on each task of the group`
          : undefined,
    );
    const get = (k: (typeof GROUP_KEYS)[number]): unknown => {
      const e = keys.get(k);
      return e === undefined || isNullish(this.aliases, e.value) ? undefined : e.value;
    };
    const label = this.readString(get('group_id'), childPath(path, 'group_id')) ?? '';
    if (label !== '' && !/^[A-Za-z0-9_][A-Za-z0-9_-]{0,199}$/.test(label)) {
      this.error(
        C.BAD_ID,
        get('group_id'),
        childPath(path, 'group_id'),
        `group_id "${label}" is not a valid group id`,
        `group ids use letters, digits, _ and - (no dots: a dot separates a group from its tasks), e.g. "${suggestId(label).replace(/\./g, '_')}"`,
      );
    }
    const prefix =
      get('prefix_group_id') === undefined
        ? true
        : (this.readBool(get('prefix_group_id'), childPath(path, 'prefix_group_id')) ?? true);
    const tooltip =
      get('tooltip') === undefined
        ? undefined
        : this.readString(get('tooltip'), childPath(path, 'tooltip'));
    const ctx: GroupCtx = {
      id: GraphSources.childId(parent, label),
      prefix,
      parent,
      path,
      ...(tooltip !== undefined ? { tooltip } : {}),
      deps: [],
    };
    const depsPath = childPath(path, 'depends_on');
    const deps =
      get('depends_on') === undefined
        ? []
        : (this.readStringList(get('depends_on'), depsPath, 'task or group ids') ?? []);
    deps.forEach((name, j) => ctx.deps.push({ name, path: indexPath(depsPath, j), kind: 'dep' }));
    this.shape.groups.push(ctx);
    const tasksRaw = get('tasks');
    const tasksNode = deref(this.aliases, tasksRaw);
    if (tasksRaw === undefined || !isSeq(tasksNode) || tasksNode.items.length === 0) {
      this.error(
        C.TASK_GROUP,
        tasksRaw ?? keys.get('tasks')?.keyNode ?? m.node,
        childPath(path, 'tasks'),
        `task group "${ctx.id}" needs a non-empty tasks: list`,
        'add tasks:\n      - task_id: first\n        command: echo first',
      );
      return;
    }
    this.compileItems(tasksNode.items, childPath(path, 'tasks'), ctx, defaults, spec);
  }

  private compileDefaults(raw: unknown): TaskDefaults {
    const d: TaskDefaults = {
      retries: 0,
      retry_delay_seconds: 300,
      execution_timeout_seconds: null,
    };
    if (isNullish(this.aliases, raw)) return d;
    const m = this.mapEntries(raw, 'defaults', 'defaults');
    if (!m) return d;
    const keys = this.checkKeys(m.entries, 'defaults', DEFAULTS_KEYS, TASK_KEY_ALIASES, (k) =>
      (TASK_KEYS as readonly string[]).includes(k)
        ? `${k} cannot be defaulted; set it on each task`
        : undefined,
    );
    const v = (k: (typeof DEFAULTS_KEYS)[number]): unknown => {
      const e = keys.get(k);
      return e === undefined || isNullish(this.aliases, e.value) ? undefined : e.value;
    };
    const retries = v('retries');
    if (retries !== undefined)
      d.retries = this.readInt(retries, 'defaults.retries', 0, 100) ?? d.retries;
    const delay = v('retry_delay_seconds');
    if (delay !== undefined)
      d.retry_delay_seconds =
        this.readInt(delay, 'defaults.retry_delay_seconds', 0, MAX_INT32) ?? d.retry_delay_seconds;
    const timeout = v('execution_timeout_seconds');
    if (timeout !== undefined)
      d.execution_timeout_seconds =
        this.readInt(timeout, 'defaults.execution_timeout_seconds', 1, MAX_INT32) ?? null;
    const backoff = v('retry_exponential_backoff');
    if (backoff !== undefined) {
      const b = this.readBackoff(backoff, 'defaults.retry_exponential_backoff');
      if (b !== undefined && b !== 0) d.retry_exponential_backoff = b;
    }
    const maxDelay = v('max_retry_delay_seconds');
    if (maxDelay !== undefined) {
      const n = this.readInt(maxDelay, 'defaults.max_retry_delay_seconds', 1, MAX_INT32);
      if (n !== undefined) d.max_retry_delay_seconds = n;
    }
    return d;
  }

  private compileParams(raw: unknown): Record<string, unknown> {
    const n = deref(this.aliases, raw);
    if (!isMap(n)) {
      this.record('params', raw);
      this.schemaError(
        raw,
        'params',
        `params must be a mapping of name: value, not ${describe(this.aliases, raw)}`,
        'write params:\n    batch_size: 100',
      );
      return {};
    }
    return this.readJson(raw, 'params', 0) as Record<string, unknown>;
  }

  private compileTask(
    raw: unknown,
    path: string,
    defaults: TaskDefaults,
    dag: DagSpec,
    ctx: GroupCtx | null = null,
    refs: RawRef[] = [],
  ): TaskSpecDef {
    const task: TaskSpecDef = {
      task_id: '',
      type: 'bash',
      command: '',
      depends_on: [],
      trigger_rule: 'all_success',
      retries: defaults.retries,
      retry_delay_seconds: defaults.retry_delay_seconds,
      execution_timeout_seconds: defaults.execution_timeout_seconds,
      env: {},
      variables: [],
      connections: [],
      do_xcom_push: false,
    };
    const m = this.mapEntries(raw, path, `${path}`);
    if (!m) return task;
    const keys = this.checkKeys(m.entries, path, TASK_KEYS, TASK_KEY_ALIASES, (k) =>
      (DAG_KEYS as readonly string[]).includes(k) && k !== 'variables' && k !== 'connections'
        ? `${k} is a DAG-level key; move it to the top of the file`
        : TASK_KEY_HINTS[k.toLowerCase()],
    );
    const p = (k: string): string => childPath(path, k);
    const entry = (k: (typeof TASK_KEYS)[number]): MapEntry | undefined => keys.get(k);
    const get = (k: (typeof TASK_KEYS)[number]): unknown => {
      const e = keys.get(k);
      return e === undefined || isNullish(this.aliases, e.value) ? undefined : e.value;
    };

    const idRaw = get('task_id');
    if (idRaw === undefined) {
      // Reported on the task, but only the id is marked bad: its other keys are still checked.
      this.invalid.add(p('task_id'));
      this.diag(
        'error',
        C.SCHEMA,
        startOffset(entry('task_id')?.keyNode ?? m.node),
        entry('task_id') ? p('task_id') : path,
        'the task has no task_id',
        'add task_id: <name> as the first key of the task',
      );
    } else {
      const label = this.readString(idRaw, p('task_id')) ?? '';
      task.task_id = label === '' ? '' : GraphSources.childId(ctx, label);
    }
    const label = task.task_id ? `task "${task.task_id}"` : `${path}`;

    const typeRaw = get('type');
    if (typeRaw !== undefined)
      task.type = this.readEnum<TaskType>(typeRaw, p('type'), TASK_TYPES) ?? 'bash';

    const commandRaw = get('command');
    const scriptRaw = get('script');
    if (commandRaw !== undefined && scriptRaw !== undefined) {
      const second = startOffset(scriptRaw) > startOffset(commandRaw) ? 'script' : 'command';
      const secondEntry = entry(second)!;
      this.error(
        C.COMMAND_AND_SCRIPT,
        secondEntry.keyNode,
        p(second),
        `${label} sets both command and script; it must set exactly one`,
        'keep command: for an inline command, or script: for a file in the DAG folder — not both',
      );
    } else if (commandRaw !== undefined) {
      task.command = this.readString(commandRaw, p('command'), { nonEmpty: true }) ?? '';
    } else if (scriptRaw !== undefined) {
      task.command = this.readScriptFile(scriptRaw, p('script'));
    } else {
      this.diag(
        'error',
        C.SCHEMA,
        startOffset(m.node),
        path,
        `${label} has neither command nor script`,
        'add command: "echo hello" (inline) or script: scripts/run.sh (a file in the DAG folder)',
      );
    }

    if (get('depends_on') !== undefined) {
      task.depends_on = this.readStringList(get('depends_on'), p('depends_on'), 'task ids') ?? [];
    } else this.record(p('depends_on'), entry('depends_on')?.value);
    task.depends_on.forEach((name, j) =>
      refs.push({ name, path: indexPath(p('depends_on'), j), kind: 'dep' }),
    );

    const flag = (k: 'setup' | 'teardown' | 'on_failure_fail_dagrun'): boolean =>
      get(k) !== undefined && this.readBool(get(k), p(k)) === true;
    if (flag('setup')) task.setup = true;
    if (flag('teardown')) task.teardown = true;
    if (flag('on_failure_fail_dagrun')) task.on_failure_fail_dagrun = true;
    if (get('setups') !== undefined) {
      const setups = this.readStringList(get('setups'), p('setups'), 'task ids') ?? [];
      if (task.teardown !== true) {
        this.error(
          C.SETUP_TEARDOWN,
          get('setups'),
          p('setups'),
          `${label} lists setups but is not a teardown`,
          'add teardown: true (its setups are the setup tasks it tears down), or move these names to depends_on',
        );
      } else {
        setups.forEach((name, j) =>
          refs.push({ name, path: indexPath(p('setups'), j), kind: 'setup' }),
        );
      }
    }

    const ruleRaw = get('trigger_rule');
    if (ruleRaw !== undefined)
      task.trigger_rule =
        this.readEnum<TriggerRule>(ruleRaw, p('trigger_rule'), TRIGGER_RULES) ?? 'all_success';
    // Airflow gives every teardown this rule; another one written is reported by the semantic check.
    else if (task.teardown === true) task.trigger_rule = 'all_done_setup_success';

    const retries = get('retries');
    if (retries !== undefined)
      task.retries = this.readInt(retries, p('retries'), 0, 100) ?? task.retries;
    const delay = get('retry_delay_seconds');
    if (delay !== undefined)
      task.retry_delay_seconds =
        this.readInt(delay, p('retry_delay_seconds'), 0, MAX_INT32) ?? task.retry_delay_seconds;
    // Unlike other keys, an explicit null here means something: "no timeout", overriding defaults.
    const timeoutEntry = entry('execution_timeout_seconds');
    if (timeoutEntry) {
      if (isNullish(this.aliases, timeoutEntry.value)) task.execution_timeout_seconds = null;
      else
        task.execution_timeout_seconds =
          this.readInt(timeoutEntry.value, p('execution_timeout_seconds'), 1, MAX_INT32) ??
          task.execution_timeout_seconds;
    }

    if (entry('env')) task.env = this.readEnv(entry('env')!.value, p('env'));

    for (const k of ['variables', 'connections'] as const) {
      const e = entry(k);
      if (!e) continue;
      const list =
        this.readStringList(
          e.value,
          p(k),
          k === 'variables' ? 'variable keys' : 'connection ids',
        ) ?? [];
      task[k] = list;
      if (list.length === 0 && dag[k].length > 0) {
        this.diag(
          'warning',
          C.EMPTY_DECLARATION_INHERITS,
          startOffset(e.value ?? e.keyNode),
          p(k),
          `${label} lists no ${k}, so it receives the DAG-level ${k} (${dag[k].join(', ')}); an empty list cannot mean "none"`,
          `remove the empty ${k} key, or list exactly the ${k} this task needs`,
        );
      }
    }

    const xcom = get('do_xcom_push');
    if (xcom !== undefined) task.do_xcom_push = this.readBool(xcom, p('do_xcom_push')) ?? false;

    const executor = get('executor');
    if (executor !== undefined) {
      const name = this.readString(executor, p('executor'), { nonEmpty: true });
      if (name !== undefined) task.executor = name;
    }
    const labels = get('runner_labels');
    // Read as plain JSON; checkDagSemantics checks its shape, like kubernetes below.
    if (labels !== undefined)
      task.runner_labels = this.readJson(labels, p('runner_labels'), 0) as Record<string, string>;
    const kube = get('kubernetes');
    // Read as plain JSON; checkDagSemantics checks its shape (with positions, via record()).
    if (kube !== undefined)
      task.kubernetes = this.readJson(kube, p('kubernetes'), 0) as TaskSpecDef['kubernetes'];

    const backoff =
      get('retry_exponential_backoff') !== undefined
        ? this.readBackoff(get('retry_exponential_backoff'), p('retry_exponential_backoff'))
        : defaults.retry_exponential_backoff;
    if (backoff !== undefined && backoff !== 0) task.retry_exponential_backoff = backoff;
    const maxDelay =
      get('max_retry_delay_seconds') !== undefined
        ? this.readInt(get('max_retry_delay_seconds'), p('max_retry_delay_seconds'), 1, MAX_INT32)
        : defaults.max_retry_delay_seconds;
    if (maxDelay !== undefined) task.max_retry_delay_seconds = maxDelay;

    this.compileBranch(
      task,
      get('branch'),
      get('short_circuit'),
      p,
      entry('do_xcom_push') !== undefined,
    );
    if (get('expand') !== undefined)
      task.expand = this.compileExpand(get('expand'), p('expand'), refs);
    if (get('max_map_length') !== undefined) {
      const n = this.readInt(get('max_map_length'), p('max_map_length'), 1, MAX_MAP_LENGTH_CEILING);
      if (n !== undefined) task.max_map_length = n;
    }
    this.checkTemplates(task, dag, p, commandRaw, scriptRaw, entry('env')?.value);
    return task;
  }

  /**
   * `{{ … }}` in a bash command and in env values (docs/authoring.md, "Templates"): checked here
   * for what holds whatever the run (syntax, names, declared secrets); the agent renders. A task
   * with none is not marked, so its spec (and hash) is what it was before templates existed, and
   * a version stored before then is never rendered.
   */
  private checkTemplates(
    task: TaskSpecDef,
    dag: DagSpec,
    p: (k: string) => string,
    commandRaw: unknown,
    scriptRaw: unknown,
    envRaw: unknown,
  ): void {
    const scope: StaticScope = {
      params: dag.params,
      variables: task.variables.length > 0 ? task.variables : dag.variables,
      connections: task.connections.length > 0 ? task.connections : dag.connections,
    };
    let templated = false;
    const check = (value: string, node: unknown, path: string, inFile: string | null): void => {
      if (!hasTemplateSyntax(value)) return;
      templated = true;
      for (const problem of checkTemplate(value, scope)) {
        let offset = startOffset(node);
        let message = problem.message;
        if (inFile !== null) {
          const before = value.slice(0, problem.offset).split('\n');
          message = `${inFile}:${before.length}:${before[before.length - 1]!.length + 1}: ${message}`;
        } else offset = this.offsetInScalar(node, value, problem.offset);
        this.diag('error', problem.code, offset, path, message, problem.hint);
      }
    };
    if (task.type === 'bash' && task.command !== '') {
      if (commandRaw !== undefined) check(task.command, commandRaw, p('command'), null);
      else if (scriptRaw !== undefined) {
        const rel = deref(this.aliases, scriptRaw);
        const name = isScalar(rel) && typeof rel.value === 'string' ? rel.value : 'the script';
        check(task.command, scriptRaw, p('script'), name);
      }
    }
    const envMap = deref(this.aliases, envRaw);
    for (const [k, v] of Object.entries(task.env)) {
      let node: unknown = envMap;
      if (isMap(envMap)) {
        const pair = envMap.items.find((it) => {
          const key = deref(this.aliases, it.key);
          return isScalar(key) && String(key.value) === k;
        });
        if (pair) node = pair.value;
      }
      check(v, node, childPath(p('env'), k), null);
    }
    if (templated) task.templated = true;
  }

  /**
   * Where `value[offset]` was written: the scalar's own text is searched for the problem's
   * line, which a plain, quoted or block scalar holds verbatim unless escapes changed it; when
   * it does not, the scalar's start.
   */
  private offsetInScalar(node: unknown, value: string, offset: number): number {
    const start = startOffset(node);
    const range = isYamlNode(node) ? node.range : undefined;
    if (!range) return start;
    const src = this.input.text.slice(range[0], range[1]);
    const lineEnd = value.indexOf('\n', offset);
    const snippet = value.slice(offset, lineEnd === -1 ? undefined : lineEnd);
    if (snippet === '') return start;
    // the same occurrence in the source as in the value
    let nth = 0;
    for (let i = value.indexOf(snippet); i !== -1 && i < offset; i = value.indexOf(snippet, i + 1))
      nth++;
    let at = -1;
    for (let k = 0; k <= nth; k++) {
      at = src.indexOf(snippet, at + 1);
      if (at === -1) return start;
    }
    return range[0] + at;
  }

  /** `retry_exponential_backoff`: true (= 2, Airflow's classic doubling), false, or a multiplier. */
  private readBackoff(raw: unknown, path: string): number | undefined {
    this.record(path, raw);
    const node = deref(this.aliases, raw);
    if (isScalar(node) && typeof node.value === 'boolean') return node.value ? 2 : 0;
    if (isScalar(node) && typeof node.value === 'number' && Number.isFinite(node.value)) {
      if (node.value >= 0 && node.value <= 1000) return node.value;
    }
    this.schemaError(
      raw,
      path,
      `retry_exponential_backoff must be true, false or a multiplier from 0 to 1000, not ${describe(this.aliases, raw)}`,
      'write retry_exponential_backoff: true (doubles the delay each try) or a multiplier such as 1.5',
    );
    return undefined;
  }

  /** `branch:` and `short_circuit:` (Airflow's branch operators and ShortCircuitOperator). */
  private compileBranch(
    task: TaskSpecDef,
    branchRaw: unknown,
    shortRaw: unknown,
    p: (k: string) => string,
    xcomWritten: boolean,
  ): void {
    if (branchRaw !== undefined) {
      const node = deref(this.aliases, branchRaw);
      if (isScalar(node) && typeof node.value === 'boolean') {
        this.record(p('branch'), branchRaw);
        if (node.value) task.branch = { mode: 'return_value' };
      } else if (isMap(node)) {
        const m = this.mapEntries(branchRaw, p('branch'), 'branch');
        const keys = m
          ? this.checkKeys(m.entries, p('branch'), ['exit_codes'], {}, () => undefined)
          : new Map<string, MapEntry>();
        const codesEntry = keys.get('exit_codes');
        const codesPath = childPath(p('branch'), 'exit_codes');
        const exitCodes: Record<string, string[]> = {};
        const codes = codesEntry
          ? this.mapEntries(codesEntry.value, codesPath, 'exit_codes')
          : undefined;
        for (const e of codes?.entries ?? []) {
          const cp = childPath(codesPath, e.key);
          this.keyLocs.set(cp, e.keyNode);
          const v = deref(this.aliases, e.value);
          const ids =
            isScalar(v) && typeof v.value === 'string'
              ? (this.record(cp, e.value), [v.value])
              : (this.readStringList(e.value, cp, 'task ids') ?? []);
          Object.defineProperty(exitCodes, e.key, {
            value: ids,
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
        if (codesEntry === undefined || (codes !== undefined && codes.entries.length === 0)) {
          this.error(
            C.BRANCH,
            codesEntry?.value ?? branchRaw,
            codesEntry ? codesPath : p('branch'),
            'branch: needs exit_codes mapping each exit code to the task ids to follow',
            'write branch: {exit_codes: {0: [full_load], 3: [incremental_load]}}, or branch: true to follow the task ids the task prints',
          );
        }
        task.branch = { mode: 'exit_code', exit_codes: exitCodes };
      } else {
        this.schemaError(
          branchRaw,
          p('branch'),
          `branch must be true, false or a mapping with exit_codes, not ${describe(this.aliases, branchRaw)}`,
          'write branch: true (the task prints the task ids to follow) or branch: {exit_codes: {0: [a], 1: [b]}}',
        );
      }
    }
    if (shortRaw !== undefined) {
      const node = deref(this.aliases, shortRaw);
      if (isScalar(node) && typeof node.value === 'boolean') {
        this.record(p('short_circuit'), shortRaw);
        if (node.value) task.short_circuit = { ignore_downstream_trigger_rules: true };
      } else if (isMap(node)) {
        const m = this.mapEntries(shortRaw, p('short_circuit'), 'short_circuit');
        const keys = m
          ? this.checkKeys(
              m.entries,
              p('short_circuit'),
              ['ignore_downstream_trigger_rules'],
              {},
              () => undefined,
            )
          : new Map<string, MapEntry>();
        const e = keys.get('ignore_downstream_trigger_rules');
        const ignore =
          e === undefined || isNullish(this.aliases, e.value)
            ? true
            : (this.readBool(
                e.value,
                childPath(p('short_circuit'), 'ignore_downstream_trigger_rules'),
              ) ?? true);
        task.short_circuit = { ignore_downstream_trigger_rules: ignore };
      } else {
        this.schemaError(
          shortRaw,
          p('short_circuit'),
          `short_circuit must be true, false or a mapping, not ${describe(this.aliases, shortRaw)}`,
          'write short_circuit: true, or short_circuit: {ignore_downstream_trigger_rules: false}',
        );
      }
    }
    // The return value decides, so it is pushed (as Airflow's branch operators always push it);
    // an explicit do_xcom_push: false is reported by the semantic check.
    if (
      (task.branch?.mode === 'return_value' || task.short_circuit !== undefined) &&
      !xcomWritten
    ) {
      task.do_xcom_push = true;
    }
  }

  /**
   * `expand:` (Airflow's `.expand(...)`): env name → a literal list, or `{xcom: upstream}` (the
   * upstream's return value, a JSON list). The upstream name is resolved like depends_on.
   */
  private compileExpand(raw: unknown, path: string, refs: RawRef[]): ExpandArg[] {
    const m = this.mapEntries(raw, path, 'expand');
    const out: ExpandArg[] = [];
    if (!m) return out;
    if (m.entries.length === 0) {
      this.error(
        C.EXPAND,
        raw,
        path,
        'expand: is empty',
        'map over at least one list: expand: {FILE: [a.csv, b.csv]} or {FILE: {xcom: list_files}}',
      );
    }
    for (const e of m.entries) {
      const ep = childPath(path, e.key);
      this.keyLocs.set(ep, e.keyNode);
      this.record(ep, e.value ?? e.keyNode);
      const v = deref(this.aliases, e.value);
      if (isSeq(v)) {
        const values = v.items.map((item, j) => this.readJson(item, indexPath(ep, j), 1));
        out.push({ env: e.key, values });
        continue;
      }
      if (isMap(v)) {
        const mm = this.mapEntries(e.value, ep, e.key);
        const keys = mm
          ? this.checkKeys(
              mm.entries,
              ep,
              ['xcom'],
              { from_xcom: 'xcom', task: 'xcom' },
              () => undefined,
            )
          : new Map<string, MapEntry>();
        const x = keys.get('xcom');
        const name = x
          ? this.readString(x.value, childPath(ep, 'xcom'), { nonEmpty: true })
          : undefined;
        if (name === undefined) {
          if (!x) {
            this.error(
              C.EXPAND,
              e.value,
              ep,
              `expand argument ${e.key} needs xcom: naming the upstream task whose return value it maps over`,
              `write ${e.key}: {xcom: list_files}`,
            );
          }
          continue;
        }
        refs.push({ name, path: childPath(ep, 'xcom'), kind: 'xcom', arg: out.length });
        out.push({ env: e.key, xcom: name });
        continue;
      }
      this.error(
        C.EXPAND,
        e.value ?? e.keyNode,
        ep,
        `expand argument ${e.key} must be a list or {xcom: task}, not ${describe(this.aliases, e.value)}`,
        `write ${e.key}: [a, b, c] (a literal list) or ${e.key}: {xcom: list_files} (an upstream's return value)`,
      );
    }
    return out;
  }

  private readScriptFile(raw: unknown, path: string): string {
    const rel = this.readString(raw, path, { nonEmpty: true });
    if (rel === undefined) return '';
    const normalized = normalizeScriptPath(rel);
    if (!normalized.ok) {
      this.error(
        C.BAD_SCRIPT_PATH,
        raw,
        path,
        `script path "${rel}" ${normalized.reason}`,
        'give a path relative to the folder that holds leoflow.yaml, e.g. script: scripts/run.sh',
      );
      return '';
    }
    let content: string | undefined;
    let failure = '';
    try {
      content = this.input.readScript(normalized.path);
    } catch (e) {
      // The reader refused the file (outside the folder, too large, not a regular file): its
      // code and message (relative path and limit only) are the diagnostic.
      if (isLeoflowError(e) && FILE_REFUSALS.has(e.code)) {
        this.error(e.code, raw, path, e.message, FILE_REFUSAL_HINT[e.code] ?? '');
        return '';
      }
      failure = `: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (content === undefined) {
      this.error(
        C.SCRIPT_NOT_FOUND,
        raw,
        path,
        `script "${normalized.path}" was not found in the DAG folder${failure}`,
        `create ${normalized.path} next to leoflow.yaml (paths are relative to the DAG folder), or fix the path`,
      );
      return '';
    }
    if (content.trim() === '') {
      this.schemaError(
        raw,
        path,
        `script "${normalized.path}" is empty`,
        'write the script, or use command: for an inline command',
      );
      return '';
    }
    return content;
  }
}

const FILE_REFUSALS: ReadonlySet<string> = new Set([
  C.FILE_OUTSIDE_FOLDER,
  C.FILE_TOO_LARGE,
  C.FILE_NOT_REGULAR,
]);

const FILE_REFUSAL_HINT: Record<string, string> = {
  [C.FILE_OUTSIDE_FOLDER]:
    'copy the file into the DAG folder instead of linking to it; DAG files are read only from inside the folder',
  [C.FILE_TOO_LARGE]:
    'keep scripts small: ship large code or data with the task image or fetch it at run time',
  [C.FILE_NOT_REGULAR]: 'point script: at a regular file inside the DAG folder',
};

function normalizeScriptPath(
  rel: string,
): { ok: true; path: string } | { ok: false; reason: string } {
  if (rel.includes('\0')) return { ok: false, reason: 'contains a NUL character' };
  if (rel.includes('\\')) return { ok: false, reason: 'uses backslashes; use / between folders' };
  if (rel.startsWith('/') || /^[A-Za-z]:/.test(rel) || rel.startsWith('~')) {
    return { ok: false, reason: 'is absolute; scripts must live inside the DAG folder' };
  }
  const parts = rel.split('/').filter((s) => s !== '' && s !== '.');
  // Any ".." is refused, even one that would stay inside: the folder is the unit that gets
  // registered, and a path that climbs out of it cannot be shipped with it.
  if (parts.includes('..')) return { ok: false, reason: 'climbs out of the DAG folder with ".."' };
  if (parts.length === 0) return { ok: false, reason: 'names no file' };
  return { ok: true, path: parts.join('/') };
}

function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  // defineProperty, not assignment: a key named "__proto__" must stay an ordinary entry.
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function lastSegment(path: string): string {
  const m = /(?:^|\.)([A-Za-z_][A-Za-z0-9_]*)$|\[("(?:[^"\\]|\\.)*")\]$|\[(\d+)\]$/.exec(path);
  if (!m) return path;
  if (m[1] !== undefined) return m[1];
  if (m[2] !== undefined) return JSON.parse(m[2]) as string;
  return path;
}

function mappingHint(path: string): string {
  if (path === '')
    return 'leoflow.yaml must be a mapping of keys such as dag_id:, schedule: and tasks:';
  if (/^tasks\[\d+\]$/.test(path))
    return 'write each task as a mapping: - task_id: name\n        command: ...';
  return `write ${lastSegment(path)} as indented key: value lines`;
}

function syntaxHint(code: string): string {
  switch (code) {
    case 'BAD_INDENT':
    case 'MISSING_CHAR':
      return 'check the indentation and the closing brackets/quotes around this line (spaces only, no tabs)';
    case 'TAB_AS_INDENT':
      return 'indent with spaces, not tabs';
    case 'BLOCK_AS_IMPLICIT_KEY':
    case 'MULTILINE_IMPLICIT_KEY':
      return 'a key must fit on one line and end with ": "; check for a missing colon or quote';
    case 'BAD_SCALAR_START':
      return 'put the value in quotes: YAML reserves a leading @ or `, e.g. schedule: "@daily"';
    case 'UNEXPECTED_TOKEN':
      return 'quote values that contain ": ", "#", "{", "[" or start with "*", "&", "!", "%", "@" or "`"';
    default:
      return 'fix the YAML syntax near this position (quote strings that contain special characters)';
  }
}
