import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LogStream, ReportedState } from '@leoflow/protocol';
import { defaultSpec } from './support/fake-agent-service.js';
import { useHarness } from './support/harness.js';

const isRoot = process.getuid?.() === 0;
if (!isRoot) {
  console.warn(
    `[agent attempt-uid process tests] SKIPPED: they need root (uid 0) to run a task under its own uid; this run has uid ${process.getuid?.()}`,
  );
}

// ten uids of the default range's far end, with a private lock directory per test
const RANGE = { first: 1879113700, last: 1879113709 };
const { runAgent, tempDir } = useHarness();

/** uid entries (not the `next` hint, not temporary files) in a lock directory */
function heldUids(lockDir: string): string[] {
  if (!existsSync(lockDir)) return [];
  return readdirSync(lockDir).filter((n) => /^\d+$/.test(n));
}

function isolationEnv(lockDir: string): Record<string, string> {
  return {
    LEOFLOW_ATTEMPT_UID_RANGE: `${RANGE.first}-${RANGE.last}`,
    LEOFLOW_ATTEMPT_UID_LOCK_DIR: lockDir,
  };
}

/** Polls (bounded) until `ok()` holds; resolves whether it did. */
async function eventually(ok: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

describe.skipIf(!isRoot)('agent: the attempt uid is allocated while Register is in flight', () => {
  it('holds its uid before Register answers, runs the task only after it, and releases the uid at exit', async () => {
    const lockDir = path.join(tempDir(), 'uids');
    let heldWhileRegistering: string[] = [];
    const { fake, code } = await runAgent(
      {
        spec: defaultSpec({ command: 'id -u' }),
        // Register answers only once the agent holds a uid (or after 3 s without one)
        register: async () => {
          await eventually(() => heldUids(lockDir).length > 0, 3_000);
          heldWhileRegistering = heldUids(lockDir);
        },
      },
      { env: isolationEnv(lockDir) },
    );
    expect(code).toBe(0);
    expect(heldWhileRegistering).toHaveLength(1);
    const uid = Number(heldWhileRegistering[0]);
    expect(uid).toBeGreaterThanOrEqual(RANGE.first);
    expect(uid).toBeLessThanOrEqual(RANGE.last);
    // the task ran as that uid, after Register answered
    expect(fake.lines(LogStream.STDOUT)).toEqual([String(uid)]);
    const order = fake.calls.map((c) => c.method);
    expect(order.indexOf('Register')).toBe(0);
    expect(fake.reports.map((r) => r.state)).toEqual([ReportedState.SUCCESS]);
    expect(heldUids(lockDir)).toEqual([]);
  });

  it('a uid that cannot be allocated fails the attempt with the reason and runs nothing', async () => {
    const lockDir = path.join(tempDir(), 'uids');
    mkdirSync(lockDir);
    chmodSync(lockDir, 0o755); // others could forge entries: the allocator refuses it
    const { fake, code } = await runAgent(
      { spec: defaultSpec({ command: 'echo TASK_RAN' }) },
      { env: isolationEnv(lockDir) },
    );
    expect(code).toBe(0); // the failure was reported: the agent's own job is done
    expect(fake.lines(LogStream.STDOUT)).toEqual([]);
    expect(fake.reports).toHaveLength(1);
    expect(fake.reports[0]!.state).toBe(ReportedState.FAILED);
    expect(fake.reports[0]!.errorMessage).toContain(
      'must be a directory owned by uid 0 with mode 0700',
    );
    expect(heldUids(lockDir)).toEqual([]);
  });

  it('a Register that says stop runs nothing and leaves no uid held', async () => {
    const lockDir = path.join(tempDir(), 'uids');
    const { fake, code } = await runAgent(
      {
        spec: defaultSpec({ command: 'echo TASK_RAN' }),
        register: () => ({ shouldTerminate: true, terminateReason: 'superseded' }),
      },
      { env: isolationEnv(lockDir) },
    );
    expect(code).toBe(2);
    expect(fake.count('GetTaskSpec')).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual([]);
    expect(heldUids(lockDir)).toEqual([]);
  });
});
