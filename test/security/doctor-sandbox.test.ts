import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, REPO, scratchDir } from '../support/processes.js';

/**
 * Issue 33: `leoflow doctor` names the attempt sandbox in force and, when it is not the
 * namespaced one, each exposure loudly; it warns when another installation on this host
 * allocates from an overlapping uid range.
 */
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const HELPER = join(REPO, 'packages/agent/dist/leoflow-sandbox');
const RANGES = '/run/leoflow/attempt-uids/ranges';
const note = join(RANGES, `doctor-test-${process.pid}`);
let scratch: ReturnType<typeof scratchDir>;

beforeAll(() => {
  scratch = scratchDir('leoflow-sec-doctor-');
});
afterAll(() => {
  rmSync(note, { force: true });
  scratch?.cleanup();
});

const doctor = (args: string[]) =>
  cli(['doctor', '--data-dir', join(scratch.dir, 'data'), ...args], {});

describe.skipIf(!isRoot || !existsSync(HELPER))('doctor and the attempt sandbox (root)', () => {
  it('namespaces in force: said so, with what remains (the host network)', async () => {
    const r = await doctor([]);
    expect(r.stdout).toMatch(/in force\s+namespaces \(mount, IPC, PID, UTS\)/);
    expect(r.stdout).toMatch(/ok\s+tasks\.sandbox/);
    expect(r.stdout).toContain('host network: loopback listeners');
  });

  it('the per-uid fallback: a warning naming why, and each exposure', async () => {
    const r = await doctor(['--isolation', 'fallback', '--network', 'none']);
    expect(r.stdout).toContain('PER-UID FALLBACK (no namespaces): execution.isolation is fallback');
    expect(r.stdout).toMatch(/warn\s+tasks\.sandbox/);
    expect(r.stdout).toContain('System V IPC and POSIX shm');
    expect(r.stdout).not.toContain('host network: loopback listeners');
  });

  it('another installation with an overlapping uid range is named', async () => {
    mkdirSync(RANGES, { recursive: true, mode: 0o700 });
    writeFileSync(note, '1879048000-1879048300\n', { mode: 0o600 });
    const r = await doctor([]);
    expect(r.stdout).toMatch(/warn\s+tasks\.attempt_uid_overlap/);
    expect(r.stdout).toContain(`doctor-test-${process.pid} (1879048000-1879048300)`);
  });
});
