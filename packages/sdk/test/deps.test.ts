import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const CLOUD = /^(google-auth-library|googleapis|gcp-metadata|gtoken|@google-cloud\/.*)$/;

interface Pkg {
  name?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** Node's lookup: node_modules/<name> in the package's folder, then each parent. */
function locate(name: string, fromDir: string): string | null {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name, 'package.json');
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) return null;
  }
}

/** Every package reachable from `pkgJson` through (optional, peer) dependencies. */
function tree(pkgJson: string): Map<string, string> {
  const seen = new Map<string, string>();
  const todo = [realpathSync(pkgJson)];
  while (todo.length > 0) {
    const file = todo.pop()!;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as Pkg;
    const deps = { ...pkg.dependencies, ...pkg.optionalDependencies, ...pkg.peerDependencies };
    for (const name of Object.keys(deps)) {
      const found = locate(name, dirname(file));
      if (found === null) continue; // an optional dependency that is not installed
      const real = realpathSync(found);
      if (seen.has(real)) continue;
      seen.set(real, name);
      todo.push(real);
    }
  }
  return seen;
}

describe('the control plane has no cloud SDK (DESIGN §7)', () => {
  it("packages/server's dependency tree holds no google-auth-library, googleapis, @google-cloud/*, gcp-metadata or gtoken", () => {
    const names = [...tree(join(root, 'packages/server/package.json')).values()];
    expect(names.length).toBeGreaterThan(10); // the walk really ran
    expect(names).toContain('@leoflow/core');
    expect(names.filter((n) => CLOUD.test(n))).toEqual([]);
  });
  it('the walk does find them from the sdk (the check can fail)', () => {
    const names = [...tree(join(root, 'packages/sdk/package.json')).values()];
    expect(names).toContain('google-auth-library');
    expect(names).toContain('gcp-metadata');
  });
  it('the sdk never imports the server', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'packages/sdk/package.json'), 'utf8')) as Pkg;
    expect(Object.keys(pkg.dependencies ?? {})).not.toContain('@leoflow/server');
  });
});
