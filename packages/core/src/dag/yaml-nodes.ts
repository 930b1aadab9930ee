import {
  isAlias,
  isMap,
  isScalar,
  isSeq,
  visit,
  type Alias,
  type Document,
  type Node as YamlNode,
} from 'yaml';
import { childPath, indexPath } from './diagnostics.js';

/**
 * Thin helpers over the yaml package's AST. The compiler walks the AST (not `toJS()` output)
 * because every diagnostic must point at the line and column of the offending node.
 */

export type { YamlNode };

export interface MapEntry {
  key: string;
  keyNode: YamlNode;
  /** the value as written: may be an Alias, or undefined/null for `key:` with no value */
  value: unknown;
}

export function isYamlNode(v: unknown): v is YamlNode {
  return isScalar(v) || isMap(v) || isSeq(v) || isAlias(v);
}

/** Each alias of a document and the node it refers to (undefined: no such anchor). */
export type AliasTable = ReadonlyMap<Alias, YamlNode | undefined>;

/**
 * Resolves every alias in one pass. yaml's `Alias.resolve` searches the whole document per
 * call, which made a file with thousands of `*common` uses quadratic.
 */
export function buildAliasTable(doc: Document): AliasTable {
  const anchors = new Map<string, YamlNode>();
  const table = new Map<Alias, YamlNode | undefined>();
  // visit() walks in document order, entering a collection before its items, so the table
  // holds, as YAML requires, the latest anchor of that name defined before each alias.
  visit(doc, {
    Node: (_key, node) => {
      if (isAlias(node)) table.set(node, anchors.get(node.source));
      else if (node.anchor) anchors.set(node.anchor, node);
    },
  });
  return table;
}

/** Follows an alias to its anchored node; anything else is returned as is. */
export function deref(aliases: AliasTable, v: unknown): unknown {
  if (isAlias(v)) return aliases.get(v);
  return v;
}

export function isNullish(aliases: AliasTable, v: unknown): boolean {
  const n = deref(aliases, v);
  return n === null || n === undefined || (isScalar(n) && n.value === null);
}

/** Text of a scalar key. Non-string keys keep their source spelling (`1.10:` stays "1.10"). */
export function keyText(key: unknown): string | undefined {
  if (!isScalar(key)) return undefined;
  if (typeof key.value === 'string') return key.value;
  if (typeof key.value === 'symbol') return '<<';
  return key.source ?? String(key.value);
}

/** Source text of a number or boolean scalar (for "quote it" hints); undefined otherwise. */
export function numberOrBoolText(v: unknown): string | undefined {
  if (!isScalar(v)) return undefined;
  if (typeof v.value === 'number' || typeof v.value === 'boolean')
    return v.source ?? String(v.value);
  return undefined;
}

export function isMergeKey(key: unknown): boolean {
  // With `merge: true` the parser turns a plain `<<` key into a symbol; a quoted '<<' stays text.
  return isScalar(key) && typeof key.value === 'symbol';
}

/** Human wording of what a node holds, for "must be X, not Y" messages. */
export function describe(aliases: AliasTable, v: unknown): string {
  const n = deref(aliases, v);
  if (n === null || n === undefined) return 'an empty value';
  if (isMap(n)) return 'a mapping';
  if (isSeq(n)) return 'a list';
  if (isScalar(n)) {
    const val = n.value;
    if (val === null) return 'an empty value (null)';
    if (typeof val === 'string') {
      const shown = val.length > 40 ? `${val.slice(0, 37)}...` : val;
      return `the string ${JSON.stringify(shown)}`;
    }
    if (typeof val === 'number') return `the number ${n.source ?? String(val)}`;
    if (typeof val === 'boolean') return `the boolean ${n.source ?? String(val)}`;
    if (val instanceof Uint8Array) return 'binary data';
  }
  return 'an unsupported value';
}

export function startOffset(v: unknown): number {
  if (isYamlNode(v)) return v.range?.[0] ?? 0;
  return 0;
}

/** True when `inner` lies textually inside `outer` (used to spot an alias inside its own anchor). */
export function encloses(outer: YamlNode, inner: YamlNode): boolean {
  const o = outer.range;
  const i = inner.range;
  if (!o || !i) return false;
  return i[0] >= o[0] && i[1] <= o[1];
}

/**
 * Node count of the document as if every alias were copied out, computed in time linear in
 * the text (each anchored node is sized once). An alias bomb has a small text and an
 * astronomically large expansion, which this reveals before anything expands it.
 */
export function expandedSize(aliases: AliasTable, root: unknown): number {
  const memo = new Map<unknown, number>();
  const size = (n: unknown): number => {
    if (isAlias(n)) {
      const target = aliases.get(n);
      return target ? size(target) : 1;
    }
    if (!isYamlNode(n)) return 0;
    const cached = memo.get(n);
    if (cached !== undefined) return cached;
    let total = 1;
    if (isMap(n)) for (const p of n.items) total += size(p.key) + size(p.value);
    else if (isSeq(n)) for (const item of n.items) total += size(item);
    memo.set(n, total);
    return total;
  };
  return size(root);
}

/**
 * The YAML path of the innermost node at `offset`, as far as the (possibly damaged) AST allows.
 * Used to give parser errors a path too.
 */
export function pathAtOffset(root: unknown, offset: number): string {
  let path = '';
  let node: unknown = root;
  const within = (n: unknown): boolean => {
    if (!isYamlNode(n) || !n.range) return false;
    return offset >= n.range[0] && offset <= n.range[1];
  };
  for (let depth = 0; depth < 64; depth++) {
    if (isMap(node)) {
      // The entry whose key starts last at or before the offset; its value may start later than
      // the offset (a tag or anchor sits between key and value) and still be the culprit.
      let hit: (typeof node.items)[number] | undefined;
      for (const pair of node.items) {
        if (startOffset(pair.key) <= offset) hit = pair;
      }
      if (!hit) return path;
      const k = keyText(hit.key) ?? '?';
      if (within(hit.key)) return childPath(path, k);
      path = childPath(path, k);
      const v = hit.value;
      if (!isYamlNode(v) || !v.range || offset < v.range[0] || offset > v.range[1]) return path;
      node = v;
    } else if (isSeq(node)) {
      const i = node.items.findIndex(within);
      if (i < 0) return path;
      path = indexPath(path, i);
      node = node.items[i];
    } else {
      return path;
    }
  }
  return path;
}
