import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/processes.js';

/**
 * The Python task SDK's own pytest suite (python/leoflow/tests), run with the project's Python
 * environment (scripts/python-env.sh, python/requirements/dev.txt: pytest). Without that
 * environment a plain `npm test` skips with a note; under CI (CI=true, or
 * LEOFLOW_TEST_REQUIRE_PYTHON=1 / LEOFLOW_TEST_REQUIRE_AIRFLOW=1 as .ci/run sets) it fails and says how to make it.
 */
function devVenv(): string | null {
  try {
    const out = execFileSync(join(REPO, 'scripts/python-env.sh'), ['--check', 'dev'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return out === '' ? null : out;
  } catch {
    return null;
  }
}

const venv = devVenv();
const required =
  process.env.CI === 'true' ||
  process.env.LEOFLOW_TEST_REQUIRE_PYTHON === '1' ||
  process.env.LEOFLOW_TEST_REQUIRE_AIRFLOW === '1';

describe('python/leoflow: the Python task SDK', () => {
  it.skipIf(venv === null && !required)('passes its pytest suite', () => {
    if (venv === null) {
      throw new Error(
        'the Python test environment is missing: run scripts/python-env.sh (it installs python/requirements/dev.txt into a cached venv; needs PyPI once)',
      );
    }
    let out = '';
    let code = 0;
    try {
      out = execFileSync(
        join(venv, 'bin/python'),
        ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'tests'],
        {
          cwd: join(REPO, 'python/leoflow'),
          encoding: 'utf8',
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PYTHONDONTWRITEBYTECODE: '1' },
        },
      );
    } catch (e) {
      const err = e as { status?: number; stdout?: string; stderr?: string };
      code = err.status ?? 1;
      out = `${err.stdout ?? ''}${err.stderr ?? ''}`;
    }
    expect(code, out).toBe(0);
    const passed = /(\d+) passed/.exec(out);
    expect(Number(passed?.[1] ?? 0), out).toBeGreaterThanOrEqual(13);
    expect(out).not.toMatch(/failed|error/i);
  });
});
