import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLeoflowError } from '@leoflow/core';
import { resolveSandboxPlan } from '../../packages/server/src/executor/sandbox-plan.js';
import { REPO } from '../support/processes.js';

/**
 * Issue 33: the sandbox helper itself, as the agent starts it (root, real processes): the
 * namespace's init records the task's exit status in a root-only file (what a restarted agent
 * reports, issue 37), a detached child dies with the namespace, only fds 0-2 reach the task
 * whatever its parent held, no_new_privs, a session keyring of its own, an empty network with
 * execution.network none; and execution.isolation required refuses to start without
 * namespaces, naming what is missing.
 */
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const HELPER = join(REPO, 'packages/agent/dist/leoflow-sandbox');
const UID = 1879113150;
let root: string;
let work: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'leoflow-sec-helper-'));
  chmodSync(root, 0o711);
  work = join(root, 'attempt');
  mkdirSync(work, { mode: 0o700 });
  if (isRoot) chownSync(work, UID, UID);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function sandboxed(
  script: string,
  extra: string[] = [],
  stdio: ('ignore' | 'pipe' | number)[] = ['ignore', 'pipe', 'pipe'],
): Promise<{ code: number | null; signal: string | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(
      HELPER,
      [
        'run',
        ...['--uid', String(UID), '--gid', String(UID), '--ns', '--landlock'],
        ...['--tmpfs', '/tmp', '--tmpfs', '/dev/shm', '--bind', work, '--chdir', work],
        ...extra,
        '--',
        '/bin/bash',
        '-c',
        script,
      ],
      { stdio, env: { PATH: '/usr/bin:/bin' } },
    );
    let out = '';
    p.stdout?.on('data', (b: Buffer) => (out += b.toString()));
    p.stderr?.on('data', (b: Buffer) => (out += b.toString()));
    p.once('exit', (code, signal) => resolve({ code, signal, out }));
  });
}

describe.skipIf(!isRoot || !existsSync(HELPER))('the sandbox helper (root)', () => {
  it("its init records the task's exit status in a root-only file, and the tree dies with it", async () => {
    const status = join(root, 'a.status');
    const r = await sandboxed('setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $$; exit 7', [
      '--status-file',
      status,
      '--grace-ms',
      '200',
    ]);
    expect(r.code).toBe(7);
    expect(readFileSync(status, 'utf8').trim()).toBe('{"exit_code":7}');
    expect((await import('node:fs')).statSync(status).mode & 0o777).toBe(0o600);
    // nothing of the uid is left on the host: the setsid child died with the namespace
    const left = spawnSync('pgrep', ['-u', String(UID)], { encoding: 'utf8' }).stdout.trim();
    expect(left).toBe('');
    const killed = await sandboxed('kill -9 $$', ['--status-file', status]);
    expect(killed.signal).toBe('SIGKILL');
    expect(readFileSync(status, 'utf8').trim()).toBe('{"signal":9}');
  });

  it('only fds 0-2, no_new_privs, a session keyring of its own, pid 2 in its own PID namespace', async () => {
    const inherited = openSync(join(root, 'inherited'), 'w');
    try {
      const r = await sandboxed(
        'for f in $(seq 0 64); do [ -e /proc/$$/fd/$f ] && echo "fd $f"; done; grep NoNewPrivs /proc/self/status; echo "pid $$"; echo "session $(keyctl rdescribe @s)"',
        [],
        [
          'ignore',
          'pipe',
          'pipe',
          'ignore',
          'ignore',
          'ignore',
          'ignore',
          'ignore',
          'ignore',
          inherited,
        ],
      );
      expect(r.code, r.out).toBe(0);
      expect(r.out.match(/^fd \d+$/gm)).toEqual(['fd 0', 'fd 1', 'fd 2']);
      expect(r.out).toMatch(/NoNewPrivs:\s+1/);
      expect(r.out).toContain('pid 2');
      // the session keyring was made after the drop to the attempt's uid: not the agent's (root's)
      expect(r.out).toMatch(new RegExp(`^session keyring;${UID};${UID};[0-9a-f]+;_ses`, 'm'));
    } finally {
      closeSync(inherited);
    }
  });

  it('execution.network none: only lo, up', async () => {
    const r = await sandboxed("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", ['--net-none']);
    expect(r.code, r.out).toBe(0);
    expect(r.out.trim().split('\n')).toEqual(['lo']);
  });
});

describe('execution.isolation required', () => {
  it('refuses to start without namespaces, naming what is missing', () => {
    const cfg = {
      agentEntry: join(REPO, 'packages/agent/dist/leoflow-agent.mjs'),
      isolation: 'required' as const,
      network: 'host' as const,
      writablePaths: [],
      tmpfsSizeBytes: 1 << 28,
    };
    const refused = (() => {
      try {
        resolveSandboxPlan(cfg, {
          isRoot: true,
          probe: () => ({
            namespaces: false,
            why: 'unshare refused (no CAP_SYS_ADMIN here)',
            landlock_abi: 0,
          }),
        });
        return null;
      } catch (err) {
        return err;
      }
    })();
    expect(isLeoflowError(refused) && refused.code).toBe('LF_SANDBOX_REQUIRED');
    expect(String((refused as Error).message)).toContain('no CAP_SYS_ADMIN');
    expect(() =>
      resolveSandboxPlan(cfg, {
        isRoot: false,
        probe: () => ({ namespaces: true, why: '', landlock_abi: 6 }),
      }),
    ).toThrow(/not root/);
    // auto: the fallback, said so
    const plan = resolveSandboxPlan(
      { ...cfg, isolation: 'auto' },
      { isRoot: true, probe: () => ({ namespaces: false, why: 'no namespaces', landlock_abi: 0 }) },
    );
    expect(plan.mode === 'uid' || plan.helper === null).toBe(true);
    expect(plan.exposures.join(' ')).toMatch(/no namespaces|no sandbox helper/);
  });
});
