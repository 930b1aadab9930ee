// Entry of the bundled agent (built to dist/leoflow-agent.mjs): runs dist/leoflow-agent.cjs,
// starting V8 from the code cache the build left in dist/leoflow-agent.cjs.cache when that
// cache belongs to this exact bundle and this V8 (else V8 compiles from source, as without it).
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script, constants as vmConstants } from 'node:vm';
import { readFileSync } from 'node:fs';
import { readCachedData, wrapSource } from './code-cache.mjs';

const dir = dirname(fileURLToPath(import.meta.url));
const file = join(dir, 'leoflow-agent.cjs');
const wrapped = wrapSource(readFileSync(file, 'utf8'));
const script = new Script(wrapped, {
  filename: file,
  cachedData: readCachedData(`${file}.cache`, wrapped),
  importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
const module = { exports: {} };
script.runInThisContext()(module.exports, createRequire(file), module, file, dir);
