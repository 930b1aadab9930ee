// The bundled agent is CommonJS compiled through vm.Script, so V8 can start it from a code cache
// the build produced beside it (Node 20 has no compile cache for modules). Shared by the entry
// (which reads the cache) and the build step (which writes it); the cache is never written at
// run time.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** The CommonJS wrapper, on the bundle's first line so line numbers stay as they are. */
export function wrapSource(source) {
  return `(function (exports, require, module, __filename, __dirname) { ${source}\n})`;
}

const HASH_BYTES = 32;

function sha256(text) {
  return createHash('sha256').update(text).digest();
}

/**
 * The cache file is sha256(wrapped source) followed by V8's cached data. V8 only checks the
 * source's length against its cache, so the hash is what ties the cache to this exact bundle:
 * a cache left over from another build is ignored, never run against the wrong source.
 */
export function cacheFileBytes(wrapped, data) {
  return Buffer.concat([sha256(wrapped), data]);
}

/** The cached data for this exact wrapped source, or undefined (missing, stale, unreadable). */
export function readCachedData(cacheFile, wrapped) {
  let bytes;
  try {
    bytes = readFileSync(cacheFile);
  } catch {
    return undefined;
  }
  if (bytes.length <= HASH_BYTES) return undefined;
  if (!bytes.subarray(0, HASH_BYTES).equals(sha256(wrapped))) return undefined;
  return bytes.subarray(HASH_BYTES);
}
