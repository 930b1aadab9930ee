import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, scratchDir } from '../support/processes.js';

// The CLI installable outside the clone (issue 40): `npm run pack:cli` makes one tarball that
// carries the workspace packages it runs on, built, where the server looks for them. Here the
// tarball is unpacked outside the clone and run from there; its third-party dependencies come
// from this checkout's node_modules (an `npm install` of the tarball fetches them from the
// registry instead, which a test does not do).

let scratch: { dir: string; cleanup: () => void };
let pkg: string;
let tarball: string;

beforeAll(() => {
  scratch = scratchDir('lf-clipack-');
  tarball = execFileSync(
    process.execPath,
    [join(REPO, 'scripts/pack-cli.mjs'), '--out', scratch.dir],
    {
      encoding: 'utf8',
    },
  ).trim();
  execFileSync('tar', ['xzf', tarball, '-C', scratch.dir]);
  pkg = join(scratch.dir, 'package');
  // third-party packages resolve from above the unpacked package, as from a global prefix: each
  // at the version the tarball names, found where this checkout installed that version
  const deps = (
    JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    }
  ).dependencies;
  const roots = [
    ...['core', 'server', 'agent', 'sdk', 'protocol', 'cli'].map((p) =>
      join(REPO, 'packages', p, 'node_modules'),
    ),
    join(REPO, 'node_modules'),
  ];
  for (const [name, version] of Object.entries(deps)) {
    if (name.startsWith('@leoflow/')) continue;
    const found = roots
      .map((r) => join(r, name))
      .find((d) => {
        try {
          return (
            (JSON.parse(readFileSync(join(d, 'package.json'), 'utf8')) as { version: string })
              .version === version
          );
        } catch {
          return false;
        }
      });
    if (!found) throw new Error(`${name}@${version} is not installed in this checkout`);
    mkdirSync(dirname(join(scratch.dir, 'node_modules', name)), { recursive: true });
    symlinkSync(found, join(scratch.dir, 'node_modules', name));
  }
}, 120_000);
afterAll(() => scratch?.cleanup());

const leoflow = (args: string[], cwd: string) =>
  spawnSync(process.execPath, [join(pkg, 'bin/leoflow.mjs'), ...args], {
    cwd,
    encoding: 'utf8',
    timeout: 120_000,
  });

describe('npm run pack:cli', () => {
  it('names every third-party dependency at its pinned version and bundles the workspace packages', () => {
    const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as {
      name: string;
      bin: Record<string, string>;
      dependencies: Record<string, string>;
      bundleDependencies: string[];
    };
    expect(manifest.bin).toMatchObject({ leoflow: './bin/leoflow.mjs' });
    const server = JSON.parse(readFileSync(join(REPO, 'packages/server/package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    expect(manifest.dependencies['better-sqlite3']).toBe(server.dependencies['better-sqlite3']);
    for (const v of Object.values(manifest.dependencies)) expect(v).toMatch(/^\d+\.\d+\.\d+$/);
    expect(manifest.bundleDependencies.sort()).toEqual([
      '@leoflow/agent',
      '@leoflow/core',
      '@leoflow/protocol',
      '@leoflow/sdk',
      '@leoflow/server',
      '@leoflow/ui',
    ]);
    const files = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' });
    for (const f of [
      'package/node_modules/@leoflow/agent/dist/leoflow-agent.mjs',
      'package/node_modules/@leoflow/sdk/dist/leoflow-sdk.mjs',
      'package/node_modules/@leoflow/ui/dist/index.html',
      'package/node_modules/@leoflow/server/dist/index.js',
    ])
      expect(files).toContain(f);
    expect(files).not.toContain('.tsbuildinfo');
    expect(files).not.toMatch(/^package\/(src|test)\//m);
  });

  it('runs from outside the clone: --version, dags validate, and a dags test with the real agent and sandbox', () => {
    const away = join(scratch.dir, 'elsewhere');
    const dag = join(away, 'hi');
    mkdirSync(dag, { recursive: true });
    writeFileSync(
      join(dag, 'leoflow.yaml'),
      'dag_id: hi\ntasks:\n  - task_id: a\n    command: echo "hi from the tarball"\n',
    );
    expect(leoflow(['--version'], away).stdout.trim()).toBe('0.1.0');
    const v = leoflow(['dags', 'validate', dag], away);
    expect(v.status, v.stderr).toBe(0);
    const t = leoflow(['dags', 'test', dag, '-o', 'json'], away);
    expect(t.status, t.stderr).toBe(0);
    expect(JSON.parse(t.stdout)).toMatchObject({ state: 'success' });
    expect(t.stderr).toContain('[a] hi from the tarball');
  }, 120_000);
});
