// Build step, run by build.mjs in a child with an empty environment: compiles the CommonJS
// bundle exactly as entry.mjs does, lets it run until it exits (on an empty environment the
// agent stops at its configuration check, after its modules have loaded), then writes V8's
// code cache.
//
// The bundle is compiled eagerly (--no-lazy for that one compile, the default restored before
// anything runs, so the cache's flag hash is the one every agent runs with): the cache then
// holds bytecode for every function, not only the ones start-up ran. Otherwise each agent
// compiles its whole RPC path (connect, protobuf, the attempt's code) from source on its first
// call, between its assignment and its task: measured on the inter-task chain, Register as the
// agent sees it went 136 -> 102 ms p50 and agent CPU 166 -> 148 ms per attempt, for a cache of
// ~560 KB instead of ~180 KB (start-up on an empty environment is unchanged).
import { renameSync, writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { Script, constants as vmConstants } from 'node:vm';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { cacheFileBytes, wrapSource } from './code-cache.mjs';

const file = process.argv[2];
if (!file) throw new Error('usage: produce-cache.mjs <dist/leoflow-agent.cjs>');
const wrapped = wrapSource(readFileSync(file, 'utf8'));
setFlagsFromString('--no-lazy');
let script;
try {
  script = new Script(wrapped, {
    filename: file,
    importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
} finally {
  setFlagsFromString('--lazy');
}
process.once('exit', () => {
  const tmp = `${file}.cache.${process.pid}`;
  writeFileSync(tmp, cacheFileBytes(wrapped, script.createCachedData()), { mode: 0o644 });
  renameSync(tmp, `${file}.cache`);
});
const module = { exports: {} };
script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file));
