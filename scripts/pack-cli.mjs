#!/usr/bin/env node
// Packs the `leoflow` command into one npm tarball that installs outside the clone:
//
//   npm run build && npm run pack:cli            # → ./leoflow-cli-<version>.tgz
//   npm install -g ./leoflow-cli-<version>.tgz   # `leoflow` on the PATH, from any folder
//
// The workspace packages it runs on (protocol, core, server, agent, sdk, ui) are not published
// anywhere, so they travel inside the tarball as bundled dependencies, built (dist/ only), side
// by side under node_modules/@leoflow/ as the server expects them (it finds the agent bundle,
// the task SDK and the web app beside its own folder). Their third-party dependencies are the
// tarball's own, at the exact versions the workspace pins, and come from the npm registry on
// install. Nothing is published; never `npx leoflow`, which runs whatever a registry serves
// under that name.
//
//   node scripts/pack-cli.mjs [--out <dir>]
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BUNDLED = ['protocol', 'core', 'server', 'agent', 'sdk', 'ui'];
const outIdx = process.argv.indexOf('--out');
const outDir = resolve(outIdx > 0 ? process.argv[outIdx + 1] : REPO);

const read = (p) => JSON.parse(readFileSync(p, 'utf8'));
const root = read(join(REPO, 'package.json'));
const cli = read(join(REPO, 'packages/cli/package.json'));

function fail(message) {
  process.stderr.write(`error: ${message}\n`);
  process.exit(1);
}

for (const p of ['cli', ...BUNDLED]) {
  if (!existsSync(join(REPO, 'packages', p, 'dist')))
    fail(`packages/${p}/dist is missing: run \`npm run build\` first`);
}
for (const f of ['packages/agent/dist/leoflow-agent.mjs', 'packages/sdk/dist/leoflow-sdk.mjs']) {
  if (!existsSync(join(REPO, f))) fail(`${f} is missing: run \`npm run build\` first`);
}

const stage = mkdtempSync(join(tmpdir(), 'leoflow-pack-'));
try {
  const pkg = join(stage, 'package');
  mkdirSync(pkg);
  cpSync(join(REPO, 'packages/cli/bin'), join(pkg, 'bin'), { recursive: true });
  const shipped = (f) => !f.endsWith('.cache') && !f.endsWith('.tsbuildinfo');
  cpSync(join(REPO, 'packages/cli/dist'), join(pkg, 'dist'), { recursive: true, filter: shipped });

  const external = {};
  const addDeps = (deps = {}, from) => {
    for (const [name, version] of Object.entries(deps)) {
      if (name.startsWith('@leoflow/')) continue;
      if (external[name] !== undefined && external[name] !== version)
        fail(`${from} pins ${name}@${version}, another package ${external[name]}: align them`);
      external[name] = version;
    }
  };
  addDeps(cli.dependencies, '@leoflow/cli');
  for (const p of BUNDLED) {
    const src = join(REPO, 'packages', p);
    const meta = read(join(src, 'package.json'));
    // The web app is static files the server serves: its own dependencies are built in.
    if (p !== 'ui') addDeps(meta.dependencies, meta.name);
    const dest = join(pkg, 'node_modules', '@leoflow', p);
    mkdirSync(dest, { recursive: true });
    cpSync(join(src, 'dist'), join(dest, 'dist'), {
      recursive: true,
      // the esbuild cache beside the agent bundle and tsc's build info are not shipped
      filter: shipped,
    });
    writeFileSync(
      join(dest, 'package.json'),
      `${JSON.stringify(
        {
          name: meta.name,
          version: meta.version,
          type: meta.type,
          ...(meta.exports ? { exports: meta.exports } : {}),
          license: root.license,
        },
        null,
        2,
      )}\n`,
    );
  }

  const sorted = Object.fromEntries(
    Object.entries(external).sort(([a], [b]) => a.localeCompare(b)),
  );
  const manifest = {
    name: cli.name,
    version: cli.version,
    description: `${root.description}: the leoflow command (client commands, standalone Lite, server)`,
    type: 'module',
    license: root.license,
    engines: root.engines,
    bin: cli.bin,
    exports: cli.exports,
    dependencies: {
      ...sorted,
      ...Object.fromEntries(BUNDLED.map((p) => [`@leoflow/${p}`, cli.version])),
    },
    bundleDependencies: BUNDLED.map((p) => `@leoflow/${p}`),
  };
  writeFileSync(join(pkg, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  mkdirSync(outDir, { recursive: true });
  const out = execFileSync('npm', ['pack', pkg, '--pack-destination', outDir, '--silent'], {
    encoding: 'utf8',
  })
    .trim()
    .split('\n')
    .pop();
  process.stdout.write(`${join(outDir, out)}\n`);
} finally {
  rmSync(stage, { recursive: true, force: true });
}
