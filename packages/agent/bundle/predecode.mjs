// Build step: the bundle's embedded proto file descriptors, decoded at build time.
//
// Generated code hydrates each .proto file with fileDesc("<base64 FileDescriptorProto>"), which
// decodes it by reflection over descriptor.proto, so every agent start first boots the whole
// descriptor.proto registry (boot()) and then runs fromBinary on each file: ~7 ms of CPU per
// process. This module decodes those strings here, with the same @bufbuild/protobuf the bundle
// uses, and writes JavaScript that rebuilds the identical objects (own properties in order, and
// the per-type prototypes that carry proto2 defaults); build.mjs swaps fileDesc for one that
// takes these objects, which also lets esbuild drop boot() and descriptor.proto.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
/** the one @bufbuild/protobuf the bundle resolves (its ESM build) */
export const PROTOBUF_ESM = (() => {
  const main = require.resolve('@bufbuild/protobuf'); // <pkg>/dist/cjs/index.js
  return join(dirname(main), '..', 'esm');
})();

async function internals() {
  const at = (p) => import(pathToFileURL(join(PROTOBUF_ESM, p)).href);
  const [{ fromBinary }, { base64Decode }, { FileDescriptorProtoSchema }, { restoreJsonNames }] =
    await Promise.all([
      at('from-binary.js'),
      at('wire/base64-encoding.js'),
      at('wkt/google/protobuf/descriptor_pb.js'),
      at('codegenv2/restore-json-names.js'),
    ]);
  // exactly what fileDesc does before it builds the registry
  return (b64) => {
    const root = fromBinary(FileDescriptorProtoSchema, base64Decode(b64));
    root.messageType.forEach(restoreJsonNames);
    return root;
  };
}

/** JavaScript source for a value; prototypes other than Object.prototype become shared consts. */
function serializer() {
  const protos = new Map(); // prototype object -> const name
  const decls = [];
  const props = (o) => {
    const out = [];
    for (const key of Reflect.ownKeys(o)) {
      const d = Object.getOwnPropertyDescriptor(o, key);
      if (typeof key !== 'string' || !d.enumerable || !('value' in d) || !d.writable) {
        throw new Error(`predecode: unexpected property ${String(key)}`);
      }
      out.push(`${JSON.stringify(key)}: ${value(d.value)}`);
    }
    return `{ ${out.join(', ')} }`;
  };
  const value = (v) => {
    if (v === undefined) return 'undefined';
    if (v === null || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
    if (typeof v === 'number') {
      if (!Number.isFinite(v) || Object.is(v, -0)) throw new Error(`predecode: number ${v}`);
      return String(v);
    }
    if (typeof v === 'bigint') return `${v}n`;
    if (v instanceof Uint8Array) return `new Uint8Array([${[...v].join(',')}])`;
    if (Array.isArray(v)) {
      if (Object.keys(v).length !== v.length) throw new Error('predecode: sparse array');
      return `[${v.map(value).join(', ')}]`;
    }
    if (typeof v === 'object') {
      const proto = Object.getPrototypeOf(v);
      if (proto === Object.prototype) return props(v);
      if (proto === null || Object.getPrototypeOf(proto) !== Object.prototype) {
        throw new Error('predecode: unexpected prototype chain');
      }
      let name = protos.get(proto);
      if (name === undefined) {
        name = `P${protos.size}`;
        protos.set(proto, name);
        decls.push(`const ${name} = ${props(proto)};`);
      }
      return `Object.assign(Object.create(${name}), ${props(v)})`;
    }
    throw new Error(`predecode: unexpected ${typeof v}`);
  };
  return { value, decls };
}

/** Structural equality including prototypes' own properties. */
function same(a, b) {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) {
    return Object.is(a, b);
  }
  if (a instanceof Uint8Array || b instanceof Uint8Array) return isDeepStrictEqual(a, b);
  const pa = Object.getPrototypeOf(a);
  const pb = Object.getPrototypeOf(b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if ((pa === Object.prototype) !== (pb === Object.prototype)) return false;
  if (pa !== Object.prototype && !Array.isArray(a) && !same(pa, pb)) return false;
  const ka = Reflect.ownKeys(a);
  const kb = Reflect.ownKeys(b);
  return isDeepStrictEqual(ka, kb) && ka.every((k) => same(a[k], b[k]));
}

/**
 * Source of an ES module exporting `predecoded`: base64 -> () => FileDescriptorProto (a fresh
 * object per call, as fromBinary would give). Throws if a rebuilt object differs from the
 * decoded one in any own property, value or prototype default.
 */
export async function predecodedModule(b64s) {
  const decode = await internals();
  const s = serializer();
  const entries = [];
  const decoded = [];
  for (const b64 of b64s) {
    const root = decode(b64);
    decoded.push(root);
    entries.push(`  [${JSON.stringify(b64)}, () => ${s.value(root)}],`);
  }
  const source = [
    '// generated by packages/agent/bundle/predecode.mjs at build time',
    ...s.decls,
    'export const predecoded = new Map([',
    ...entries,
    ']);',
    '',
  ].join('\n');
  const { predecoded } = await import(
    `data:text/javascript;base64,${Buffer.from(source).toString('base64')}`
  );
  b64s.forEach((b64, i) => {
    if (!same(predecoded.get(b64)(), decoded[i])) {
      throw new Error(`predecode: rebuilt descriptor differs from ${decoded[i].name}`);
    }
  });
  return source;
}
