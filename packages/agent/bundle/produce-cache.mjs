// Build step, run by build.mjs in a child with an empty environment: compiles the CommonJS
// bundle exactly as entry.mjs does, lets it run until it exits (on an empty environment the
// agent stops at its configuration check, after its modules have loaded), then writes V8's
// code cache, which by then holds the functions that start-up compiled.
import { renameSync, writeFileSync } from 'node:fs';
import { Script, constants as vmConstants } from 'node:vm';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { cacheFileBytes, wrapSource } from './code-cache.mjs';

const file = process.argv[2];
if (!file) throw new Error('usage: produce-cache.mjs <dist/leoflow-agent.cjs>');
const wrapped = wrapSource(readFileSync(file, 'utf8'));
const script = new Script(wrapped, {
  filename: file,
  importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
process.once('exit', () => {
  const tmp = `${file}.cache.${process.pid}`;
  writeFileSync(tmp, cacheFileBytes(wrapped, script.createCachedData()), { mode: 0o644 });
  renameSync(tmp, `${file}.cache`);
});
const module = { exports: {} };
script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file));
