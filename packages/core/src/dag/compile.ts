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
import { checkDagSemantics, suggestId } from './semantic.js';
import {
  DAG_SCHEMA_VERSION,
  ID_PATTERN,
  TASK_TYPES,
  TRIGGER_RULES,
  type DagSpec,
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
] as const;

export const DEFAULTS_KEYS = [
  'retries',
  'retry_delay_seconds',
  'execution_timeout_seconds',
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
      for (const issue of checkDagSemantics(draft, (p) => this.isInvalid(p))) {
        const node = issue.atKey
          ? (this.keyLocs.get(issue.path) ?? this.locate(issue.path))
          : this.locate(issue.path);
        this.diag(
          issue.severity,
          issue.code,
          startOffset(node),
          issue.path,
          issue.message,
          issue.hint,
        );
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
    tasksNode.items.forEach((item, i) => {
      spec.tasks.push(this.compileTask(item, indexPath('tasks', i), defaults, spec));
    });
    return spec;
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
        : undefined,
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
      task.task_id = this.readString(idRaw, p('task_id')) ?? '';
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

    const ruleRaw = get('trigger_rule');
    if (ruleRaw !== undefined)
      task.trigger_rule =
        this.readEnum<TriggerRule>(ruleRaw, p('trigger_rule'), TRIGGER_RULES) ?? 'all_success';

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

    return task;
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
