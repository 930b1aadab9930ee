import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

interface LockedPackage {
  version?: string;
  engines?: { node?: string } | string[];
  link?: boolean;
}

const root = new URL('../../', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
  engines: { node: string };
};
const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8')) as {
  packages: Record<string, LockedPackage>;
};

/** The oldest Node the root `engines` field admits: what a user on the floor runs. */
function nodeFloor(range: string): string {
  const floor = semver.minVersion(range);
  if (!floor) throw new Error(`engines.node "${range}" admits no version`);
  return floor.version;
}

/** Installed packages whose own engines.node refuses `nodeVersion` ("name@version needs range"). */
function packagesRefusing(packages: Record<string, LockedPackage>, nodeVersion: string): string[] {
  const refusing: string[] = [];
  for (const [path, pkg] of Object.entries(packages)) {
    const range = !pkg.engines || Array.isArray(pkg.engines) ? undefined : pkg.engines.node;
    if (!path || pkg.link || !range) continue;
    if (!semver.satisfies(nodeVersion, range, { includePrerelease: false })) {
      const marker = path.lastIndexOf('node_modules/');
      const name = marker < 0 ? path : path.slice(marker + 'node_modules/'.length);
      refusing.push(`${name}@${pkg.version ?? '?'} needs node ${range}`);
    }
  }
  return refusing;
}

describe('the installed tree runs on the Node the README promises', () => {
  const floor = nodeFloor(manifest.engines.node);

  it('the root engines field names Node 20 as its floor', () => {
    expect(semver.major(floor)).toBe(20);
  });

  it('no package the lockfile installs declares it needs a newer Node than the floor', () => {
    // npm only warns (EBADENGINE) on such a package; a runtime one can then fail on Node 20
    // at the first call that uses what it needs. Fix: pin the last release that supports the
    // floor, through "overrides" when it is a transitive dependency.
    expect(packagesRefusing(lock.packages, floor)).toEqual([]);
  });

  it('finds a package that refuses the floor (the check can fail)', () => {
    const planted = {
      '': { version: '0.1.0', engines: { node: '>=20.19 <23' } },
      'node_modules/fastify/node_modules/cookie': { version: '2.0.2', engines: { node: '>=22' } },
      'node_modules/old-style': { version: '1.0.0', engines: ['node >= 0.8'] },
      'packages/server': { version: '0.1.0', engines: { node: '>=99' }, link: false },
      'node_modules/@leoflow/server': { link: true },
    };
    expect(packagesRefusing(planted, floor)).toEqual([
      'cookie@2.0.2 needs node >=22',
      'packages/server@0.1.0 needs node >=99',
    ]);
  });
});
