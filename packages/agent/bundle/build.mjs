// `npm run bundle`: the agent as one CommonJS file plus an ESM entry and a V8 code cache.
//   dist/leoflow-agent.mjs        entry the executor starts (entry.mjs + code-cache.mjs)
//   dist/leoflow-agent.cjs        src/main.ts and its dependencies
//   dist/leoflow-agent.cjs.cache  V8 code cache for that exact file (see code-cache.mjs)
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(pkg, 'dist');
const cjs = join(dist, 'leoflow-agent.cjs');

await build({
  absWorkingDir: pkg,
  entryPoints: ['src/main.ts'],
  bundle: true,
  // `Headers` in the bundle is LiteHeaders: Node's global loads undici on first use
  inject: ['src/bundle-globals.ts'],
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  conditions: ['source'],
  sourcemap: true,
  outfile: cjs,
  logLevel: 'warning',
});
await build({
  absWorkingDir: pkg,
  entryPoints: ['bundle/entry.mjs'],
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  outfile: join(dist, 'leoflow-agent.mjs'),
  logLevel: 'warning',
});

rmSync(`${cjs}.cache`, { force: true });
const r = spawnSync(process.execPath, [join(pkg, 'bundle/produce-cache.mjs'), cjs], {
  env: {},
  stdio: ['ignore', 'ignore', 'pipe'],
  encoding: 'utf8',
});
// exit 2: the agent's configuration check refused the empty environment, as intended
if (r.status !== 2 || !existsSync(`${cjs}.cache`)) {
  throw new Error(`producing the agent's code cache failed (exit ${r.status}): ${r.stderr}`);
}
