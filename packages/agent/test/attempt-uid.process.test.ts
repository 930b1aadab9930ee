import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LogStream, ReportedState } from '@leoflow/protocol';
import { defaultSpec } from './support/fake-agent-service.js';
import { TOKEN, useHarness } from './support/harness.js';
import { assign, STANDBY_ENV, waitFor } from './support/spawn-agent.js';
import { procfs } from '../src/index.js';

const isRoot = process.getuid?.() === 0;
if (!isRoot) {
  console.warn(
    `[agent attempt-uid process tests] SKIPPED: they need root (uid 0) to run a task under its own uid; this run has uid ${process.getuid?.()}`,
  );
}

// ten uids of the default range's far end, with a private lock directory per test
const RANGE = { first: 1879113700, last: 1879113709 };
const { runAgent, tempDir, startFake, start } = useHarness();

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

describe.skipIf(!isRoot)('agent: a standby agent allocates its uid while it waits', () => {
  /** A standby agent with a uid range, holding its uid once the lock directory shows it. */
  const startStandby = async (url: string, lockDir: string) => {
    const agent = start({
      url,
      token: '',
      workdir: '',
      holdTokenPipe: true,
      env: { ...isolationEnv(lockDir), ...STANDBY_ENV },
    });
    await waitFor(() => heldUids(lockDir).length > 0, 10_000, 'the standby agent to hold a uid');
    return agent;
  };

  it('holds one uid before its assignment, runs nothing as it before Register, and releases it at exit', async () => {
    const lockDir = path.join(tempDir(), 'uids');
    let heldAtRegister: string[] = [];
    let processesAtRegister = -1;
    const fake = await startFake({
      spec: defaultSpec({ command: 'id -u' }),
      register: () => {
        heldAtRegister = heldUids(lockDir);
        processesAtRegister = procfs.processesOf(Number(heldAtRegister[0])).length;
      },
    });
    const agent = await startStandby(fake.url, lockDir);
    const held = heldUids(lockDir);
    expect(held).toHaveLength(1);
    expect(fake.calls).toHaveLength(0);
    const workdir = tempDir();
    assign(agent, { token: TOKEN, task_instance_id: 'ti-1', workdir });
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(0);
    // the attempt kept the uid it was waiting with: one agent, one uid
    expect(heldAtRegister).toEqual(held);
    expect(processesAtRegister).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual(held);
    expect(heldUids(lockDir)).toEqual([]);
  });

  it('gives its uid back when it is released without an attempt', async () => {
    const lockDir = path.join(tempDir(), 'uids');
    const fake = await startFake({ spec: defaultSpec({ command: 'true' }) });
    const agent = await startStandby(fake.url, lockDir);
    (agent.child.stdio[3] as Writable).end();
    const { code } = await agent.exited;
    expect(code).toBe(0);
    expect(fake.calls).toHaveLength(0);
    expect(heldUids(lockDir)).toEqual([]);
  });
});
