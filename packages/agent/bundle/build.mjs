// `npm run bundle`: the agent as one CommonJS file plus an ESM entry and a V8 code cache.
//   dist/leoflow-agent.mjs        entry the executor starts (entry.mjs + code-cache.mjs)
//   dist/leoflow-agent.cjs        src/main.ts and its dependencies
//   dist/leoflow-agent.cjs.cache  V8 code cache for that exact file (see code-cache.mjs)
//   dist/leoflow-sandbox          the sandbox helper every attempt starts through (native/)
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { PROTOBUF_ESM, predecodedModule } from './predecode.mjs';
import { buildSandboxHelper } from '../native/build.mjs';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(pkg, 'dist');
const cjs = join(dist, 'leoflow-agent.cjs');

const agentBuild = {
  absWorkingDir: pkg,
  entryPoints: ['src/main.ts'],
  bundle: true,
  // `Headers` in the bundle is LiteHeaders: Node's global loads undici on first use
  inject: ['src/bundle-globals.ts'],
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  conditions: ['source'],
  // ws's optional native speed-ups: absent, ws falls back to JavaScript
  external: ['bufferutil', 'utf-8-validate'],
  sourcemap: true,
  outfile: cjs,
  logLevel: 'warning',
};

// Pass 1 finds the proto file descriptors the bundle embeds (fileDesc("<base64>")); pass 2
// replaces @bufbuild/protobuf's fileDesc with one that takes them decoded at build time
// (see predecode.mjs).
const first = await build({ ...agentBuild, sourcemap: false, write: false });
const b64s = [
  ...new Set(
    [...first.outputFiles[0].text.matchAll(/\bfileDesc\d*\(\s*"([A-Za-z0-9+/=]+)"/g)].map(
      (m) => m[1],
    ),
  ),
];
if (b64s.length === 0) throw new Error('no embedded file descriptors found in the agent bundle');
const predecoded = await predecodedModule(b64s);
const fileJs = join(PROTOBUF_ESM, 'codegenv2', 'file.js');
await build({
  ...agentBuild,
  plugins: [
    {
      name: 'predecoded-file-descriptors',
      setup(b) {
        b.onResolve({ filter: /^leoflow:predecoded$/ }, () => ({
          path: 'predecoded',
          namespace: 'leoflow',
        }));
        b.onLoad({ filter: /.*/, namespace: 'leoflow' }, () => ({
          contents: predecoded,
          loader: 'js',
        }));
        b.onLoad({ filter: /[\\/]codegenv2[\\/]file\.js$/ }, (args) => {
          if (args.path !== fileJs) return undefined;
          return {
            loader: 'js',
            resolveDir: dirname(fileJs),
            // fileDesc as in @bufbuild/protobuf, minus fromBinary: same registry, same DescFile
            contents: `
import { createEmbeddedFileRegistry } from "../registry.js";
import { predecoded } from "leoflow:predecoded";
export function fileDesc(b64, imports) {
  const make = predecoded.get(b64);
  if (make === undefined) throw new Error("leoflow-agent bundle: file descriptor not decoded at build time");
  const root = make();
  root.dependency = imports?.map((f) => f.proto.name) ?? [];
  const reg = createEmbeddedFileRegistry(root, (name) => imports?.find((f) => f.proto.name === name));
  return reg.getFile(root.name);
}
`,
          };
        });
      },
    },
  ],
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

buildSandboxHelper();
