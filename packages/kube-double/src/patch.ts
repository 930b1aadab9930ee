// The three PATCH content types the apiserver takes: JSON merge patch (RFC 7386), JSON patch
// (RFC 6902) and strategic merge patch, the last one over the merge keys of the built-in types
// (lists of containers, env, volumes, ports, ... merge element-wise by their key; other lists are
// replaced) with the directives kubectl emits ($patch, $retainKeys, $setElementOrder/...,
// $deleteFromPrimitiveList/...).
import { isRecord } from './objects.js';
import { badRequest, KubeApiError } from './status.js';

type Value = unknown;

export function mergePatch(target: Value, patch: Value): Value {
  if (!isRecord(patch)) return structuredClone(patch);
  const result: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

function pointerTokens(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw badRequest(`invalid JSON pointer: ${pointer}`);
  return pointer
    .slice(1)
    .split('/')
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function resolveParent(document: Value, tokens: string[]): { parent: Value; key: string } {
  let current: Value = document;
  for (const token of tokens.slice(0, -1)) {
    if (Array.isArray(current)) current = current[Number(token)];
    else if (isRecord(current)) current = current[token];
    else throw new KubeApiError(422, 'Invalid', `jsonpatch: path not found: ${tokens.join('/')}`);
  }
  return { parent: current, key: tokens[tokens.length - 1] ?? '' };
}

function readPointer(document: Value, pointer: string): Value {
  let current: Value = document;
  for (const token of pointerTokens(pointer)) {
    if (Array.isArray(current)) current = current[Number(token)];
    else if (isRecord(current)) current = current[token];
    else return undefined;
  }
  return current;
}

interface Operation {
  op: string;
  path: string;
  from?: string;
  value?: Value;
}

export function jsonPatch(target: Value, operations: Value): Value {
  if (!Array.isArray(operations)) throw badRequest('json patch must be an array of operations');
  let document = structuredClone(target);
  for (const raw of operations as Operation[]) {
    const tokens = pointerTokens(raw.path);
    const apply = (op: string, value: Value) => {
      if (tokens.length === 0) {
        if (op === 'remove') throw badRequest('cannot remove the document root');
        document = structuredClone(value);
        return;
      }
      const { parent, key } = resolveParent(document, tokens);
      if (Array.isArray(parent)) {
        const index = key === '-' ? parent.length : Number(key);
        if (op === 'add') parent.splice(index, 0, structuredClone(value));
        else if (op === 'remove') parent.splice(index, 1);
        else parent[index] = structuredClone(value);
      } else if (isRecord(parent)) {
        if (op === 'remove' || op === 'replace') {
          if (!(key in parent)) {
            throw new KubeApiError(
              422,
              'Invalid',
              `the server rejected our request due to an error in our request: jsonpatch ${op} operation does not apply: doc is missing key: ${raw.path}`,
            );
          }
        }
        if (op === 'remove') delete parent[key];
        else parent[key] = structuredClone(value);
      } else {
        throw new KubeApiError(422, 'Invalid', `jsonpatch: path not found: ${raw.path}`);
      }
    };
    switch (raw.op) {
      case 'add':
      case 'replace':
        apply(raw.op, raw.value);
        break;
      case 'remove':
        apply('remove', undefined);
        break;
      case 'copy':
      case 'move': {
        const value = readPointer(document, raw.from ?? '');
        if (raw.op === 'move') {
          const fromTokens = pointerTokens(raw.from ?? '');
          const { parent, key } = resolveParent(document, fromTokens);
          if (Array.isArray(parent)) parent.splice(Number(key), 1);
          else if (isRecord(parent)) delete parent[key];
        }
        apply('add', value);
        break;
      }
      case 'test':
        if (JSON.stringify(readPointer(document, raw.path)) !== JSON.stringify(raw.value)) {
          throw new KubeApiError(422, 'Invalid', `testing value ${raw.path} failed`);
        }
        break;
      default:
        throw badRequest(`unexpected json patch operation: ${raw.op}`);
    }
  }
  return document;
}

/** Lists that merge element-wise, by the key named here (patchMergeKey in the Go types). */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  imagePullSecrets: 'name',
  conditions: 'type',
  ownerReferences: 'uid',
  hostAliases: 'ip',
  topologySpreadConstraints: 'topologyKey',
  resourceClaims: 'name',
  secrets: 'name',
};

/** Lists of scalars that merge as sets. */
const MERGED_PRIMITIVE_LISTS = new Set(['finalizers']);

function mergeKeyFor(field: string, items: unknown[]): string | undefined {
  if (field === 'ports') {
    const first = items.find(isRecord);
    if (first === undefined) return undefined;
    return 'containerPort' in first ? 'containerPort' : 'port';
  }
  return MERGE_KEYS[field];
}

function mergeList(
  field: string,
  original: unknown,
  patch: unknown[],
  parentPatch: Record<string, unknown>,
): unknown[] {
  const base = Array.isArray(original) ? [...(original as unknown[])] : [];
  if (MERGED_PRIMITIVE_LISTS.has(field)) {
    const merged = [...base];
    for (const value of patch) if (!merged.includes(value)) merged.push(value);
    return merged;
  }
  const key = mergeKeyFor(field, [...patch, ...base]);
  if (key === undefined) {
    return patch.filter((item) => !(isRecord(item) && item.$patch === 'delete'));
  }
  if (patch.some((item) => isRecord(item) && item.$patch === 'replace'))
    return patch.filter((entry) => !(isRecord(entry) && '$patch' in entry));
  const keyOf = (entry: unknown) => (isRecord(entry) ? entry[key] : undefined);
  const serverIndex = new Map(base.map((entry, index) => [keyOf(entry), index]));
  const merged = new Map(base.map((entry) => [keyOf(entry), entry]));
  const patched: unknown[] = [];
  for (const item of patch) {
    if (!isRecord(item)) continue;
    const k = item[key];
    if (item.$patch === 'delete') {
      merged.delete(k);
      continue;
    }
    merged.set(k, strategicMergePatch(merged.get(k), item));
    if (!patched.includes(k)) patched.push(k);
  }
  // The apiserver's order when the patch sets none: the patched items in the patch's order and the
  // untouched ones in the server's order, interleaved by server position; an item new to the
  // server goes before the untouched item it meets.
  const untouched = base.map(keyOf).filter((k) => merged.has(k) && !patched.includes(k));
  const keys: unknown[] = [];
  while (untouched.length > 0 && patched.length > 0) {
    const next = patched[0];
    const at = serverIndex.get(next);
    if (at !== undefined && (serverIndex.get(untouched[0]) ?? 0) < at) keys.push(untouched.shift());
    else keys.push(patched.shift());
  }
  let result: unknown[] = [...keys, ...untouched, ...patched].map((k) => merged.get(k));
  const order = parentPatch[`$setElementOrder/${field}`];
  if (Array.isArray(order)) {
    const position = (entry: unknown) => {
      const at = order.findIndex(
        (wanted) => isRecord(wanted) && isRecord(entry) && wanted[key] === entry[key],
      );
      return at < 0 ? order.length : at;
    };
    result = [...result].sort((a, b) => position(a) - position(b));
  }
  return result;
}

export function strategicMergePatch(target: Value, patch: Value): Value {
  if (!isRecord(patch)) return structuredClone(patch);
  if (patch.$patch === 'replace') {
    const { $patch: _directive, ...rest } = patch;
    return structuredClone(rest);
  }
  if (patch.$patch === 'delete') return undefined;
  const result: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key === '$patch' || key === '$retainKeys' || key.startsWith('$setElementOrder/')) continue;
    if (key.startsWith('$deleteFromPrimitiveList/')) {
      const field = key.slice('$deleteFromPrimitiveList/'.length);
      const current = result[field];
      if (Array.isArray(current) && Array.isArray(value)) {
        result[field] = current.filter((entry) => !value.includes(entry));
      }
      continue;
    }
    if (value === null) {
      delete result[key];
    } else if (Array.isArray(value)) {
      result[key] = mergeList(key, result[key], value, patch);
    } else if (isRecord(value)) {
      const merged = strategicMergePatch(result[key], value);
      if (merged === undefined) delete result[key];
      else result[key] = merged;
    } else {
      result[key] = value;
    }
  }
  const retain = patch.$retainKeys;
  if (Array.isArray(retain)) {
    for (const key of Object.keys(result)) if (!retain.includes(key)) delete result[key];
  }
  return result;
}
