import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LogStream, ReportedState, TaskType } from '@leoflow/protocol';
import { defaultSpec } from './support/fake-agent-service.js';
import { TOKEN, useHarness } from './support/harness.js';
import { pidGone, waitFor } from './support/spawn-agent.js';

const { runAgent, tempDir, startFake, start } = useHarness();

describe('agent process: task lifecycle', () => {
  it('runs a bash task: ships logs in order, pushes the last stdout line, reports SUCCESS', async () => {
    const { fake, code, diag } = await runAgent({
      spec: defaultSpec({
        command: 'echo one; echo two >&2; sleep 0.1; printf "three\\r\\nfour"; echo; echo "   "',
        doXcomPush: true,
      }),
    });
    expect(code, diag).toBe(0);
    const numbers = fake.logLines.map((l) => Number(l.lineNumber));
    expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    expect(numbers[0]).toBe(1);
    expect(new Set(numbers).size).toBe(numbers.length);
    expect(numbers).toEqual(numbers.map((_, i) => i + 1));
    expect(fake.lines(LogStream.STDOUT)).toEqual(['one', 'three', 'four', '   ']);
    expect(fake.lines(LogStream.STDERR)).toEqual(['two']);
    expect(fake.xcomPushes).toHaveLength(1);
    expect(fake.xcomPushes[0]!.key).toBe('return_value');
    expect(fake.xcomPushes[0]!.contentType).toBe('text/plain');
    expect(new TextDecoder().decode(fake.xcomPushes[0]!.value)).toBe('four');
    expect(fake.reports).toHaveLength(1);
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
    expect(fake.reports[0]!.exitCode).toBe(0);
    // Every call carried the bearer from fd 3; the order is the documented flow.
    expect(fake.calls.every((c) => c.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(fake.calls[0]!.method).toBe('Register');
    expect(fake.calls[1]!.method).toBe('GetTaskSpec');
    expect(fake.calls[fake.calls.length - 1]!.method).toBe('ReportState');
    expect(fake.registers[0]!.pid).toBeGreaterThan(0);
    expect(fake.registers[0]!.agentVersion).toMatch(/^\d+\.\d+\.\d+/);
    expect(diag).not.toContain(TOKEN);
  });

  it('reports FAILED with the exit code and pushes no XCom when the task fails', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({ command: 'echo partial; exit 3', doXcomPush: true }),
    });
    expect(code).toBe(0);
    expect(fake.xcomPushes).toHaveLength(0);
    expect(fake.reports).toHaveLength(1);
    expect(fake.reports[0]!.state).toBe(ReportedState.FAILED);
    expect(fake.reports[0]!.exitCode).toBe(3);
    expect(fake.reports[0]!.errorMessage).toBe('task exited with code 3');
    expect(fake.reports[0]!.timedOut).toBe(false);
  });

  it('runs a python task from <workdir>/task.py', async () => {
    const { fake, code, workdir } = await runAgent({
      spec: defaultSpec({
        type: TaskType.PYTHON,
        command:
          'import os, sys\nprint("cwd=" + os.getcwd())\nprint("py-err", file=sys.stderr)\nprint("py-result")\n',
        doXcomPush: true,
      }),
    });
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual([`cwd=${workdir}`, 'py-result']);
    expect(fake.lines(LogStream.STDERR)).toEqual(['py-err']);
    expect(new TextDecoder().decode(fake.xcomPushes[0]!.value)).toBe('py-result');
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
    expect(readFileSync(path.join(workdir, 'task.py'), 'utf8')).toContain('py-result');
  });

  it('runs a node task from <workdir>/task.mjs and fails it on a thrown error', async () => {
    const ok = await runAgent({
      spec: defaultSpec({
        type: TaskType.NODE,
        command: 'console.log(JSON.stringify({ n: 41 + 1 }));\n',
        doXcomPush: true,
      }),
    });
    expect(ok.code).toBe(0);
    expect(new TextDecoder().decode(ok.fake.xcomPushes[0]!.value)).toBe('{"n":42}');
    expect(ok.fake.reports[0]!.state).toBe(ReportedState.SUCCESS);

    const bad = await runAgent({
      spec: defaultSpec({ type: TaskType.NODE, command: 'throw new Error("boom");\n' }),
    });
    expect(bad.fake.reports[0]!.state).toBe(ReportedState.FAILED);
    expect(bad.fake.reports[0]!.exitCode).toBe(1);
    expect(bad.fake.lines(LogStream.STDERR).join('\n')).toContain('boom');
  });

  it('execution timeout kills the whole process group and reports timed_out', async () => {
    const started = Date.now();
    const { fake, code, workdir } = await runAgent({
      spec: defaultSpec({
        command: 'sleep 300 & echo $! > grandchild.pid; echo waiting; wait',
        executionTimeoutSeconds: 1,
        doXcomPush: true,
      }),
    });
    expect(code).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    const grandchild = Number(readFileSync(path.join(workdir, 'grandchild.pid'), 'utf8'));
    expect(grandchild).toBeGreaterThan(0);
    expect(pidGone(grandchild)).toBe(true);
    expect(fake.reports).toHaveLength(1);
    const r = fake.reports[0]!;
    expect(r.state).toBe(ReportedState.FAILED);
    expect(r.timedOut).toBe(true);
    expect(r.errorMessage).toBe('execution timeout after 1s');
    expect(r.exitCode).toBe(128 + 15);
    expect(fake.xcomPushes).toHaveLength(0);
    expect(fake.lines(LogStream.AGENT).some((l) => l.includes('execution timeout after 1s'))).toBe(
      true,
    );
  });

  it('should_terminate from a heartbeat kills the group and exits without reporting', async () => {
    const { fake, code, workdir } = await runAgent(
      {
        spec: defaultSpec({ command: 'sleep 300 & echo $! > grandchild.pid; wait' }),
        heartbeat: (n) =>
          n >= 2 ? { shouldTerminate: true, terminateReason: 'try superseded' } : {},
      },
      { env: { LEOFLOW_HEARTBEAT_INTERVAL_MS: '200' } },
    );
    expect(code).toBe(4);
    expect(fake.reports).toHaveLength(0);
    expect(fake.count('Heartbeat')).toBeGreaterThanOrEqual(2);
    const grandchild = Number(readFileSync(path.join(workdir, 'grandchild.pid'), 'utf8'));
    expect(pidGone(grandchild)).toBe(true);
    expect(fake.lines(LogStream.AGENT).some((l) => l.includes('try superseded'))).toBe(true);
  });

  it('swaps in a renewed token for every later call', async () => {
    const { fake, code } = await runAgent(
      {
        spec: defaultSpec({ command: 'sleep 0.8; echo done' }),
        heartbeat: (n) =>
          n === 1 ? { renewedToken: 'tok-2.renewed.sig' } : n === 2 ? { renewedToken: '' } : {},
      },
      { env: { LEOFLOW_HEARTBEAT_INTERVAL_MS: '200' } },
    );
    expect(code).toBe(0);
    const firstHb = fake.calls.findIndex((c) => c.method === 'Heartbeat');
    expect(fake.calls[firstHb]!.authorization).toBe(`Bearer ${TOKEN}`);
    const before = fake.calls.slice(0, firstHb + 1);
    expect(before.every((c) => c.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(fake.callsOf('Heartbeat')[1]!.authorization).toBe('Bearer tok-2.renewed.sig');
    // An empty renewal is a no-op: the final report still uses the renewed token.
    expect(fake.callsOf('ReportState')[0]!.authorization).toBe('Bearer tok-2.renewed.sig');
    expect(fake.callsOf('Heartbeat').length).toBeGreaterThanOrEqual(3);
  });

  it('caps long lines at 64 KiB with a marker and ships a final partial line', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({
        type: TaskType.PYTHON,
        command:
          'import sys\nsys.stdout.write("é" * 60000 + "\\n")\nsys.stdout.write("after\\r\\n")\nsys.stdout.write("tail-without-newline")\n',
        doXcomPush: true,
      }),
    });
    expect(code).toBe(0);
    const out = fake.lines(LogStream.STDOUT);
    expect(out).toHaveLength(3);
    const [long, after, tail] = out as [string, string, string];
    expect(long.startsWith('é'.repeat(1000))).toBe(true);
    expect(long).toMatch(/…\[line truncated: \d+ more bytes dropped\]$/);
    const head = long.slice(0, long.indexOf(' …['));
    expect(Buffer.byteLength(head)).toBeLessThanOrEqual(64 * 1024);
    expect(head).toBe('é'.repeat(head.length)); // cut on a character boundary
    expect(Buffer.byteLength(head) + Number(/truncated: (\d+)/.exec(long)![1])).toBe(120000);
    expect(after).toBe('after');
    expect(tail).toBe('tail-without-newline');
    expect(new TextDecoder().decode(fake.xcomPushes[0]!.value)).toBe('tail-without-newline');
  });

  it('on SIGTERM kills the task group first, reports FAILED and exits 143', async () => {
    const fake = await startFake({
      spec: defaultSpec({ command: 'sleep 300 & echo $! > grandchild.pid; echo ready; wait' }),
    });
    const workdir = tempDir();
    const agent = start({ url: fake.url, token: TOKEN, workdir });
    await waitFor(() => fake.lines(LogStream.STDOUT).includes('ready'), 10_000, 'task ready');
    const grandchild = Number(readFileSync(path.join(workdir, 'grandchild.pid'), 'utf8'));
    agent.child.kill('SIGTERM');
    const { code } = await agent.exited;
    expect(code).toBe(143);
    expect(pidGone(grandchild)).toBe(true);
    expect(fake.reports).toHaveLength(1);
    expect(fake.reports[0]!.state).toBe(ReportedState.FAILED);
    expect(fake.reports[0]!.errorMessage).toBe('agent received SIGTERM; task killed');
  });

  it('escalates to SIGKILL when the task ignores SIGTERM', async () => {
    const { fake, code, workdir } = await runAgent(
      {
        spec: defaultSpec({
          command: 'trap "" TERM; sleep 300 & echo $! > grandchild.pid; wait; wait',
          executionTimeoutSeconds: 1,
        }),
      },
      { env: { LEOFLOW_KILL_GRACE_MS: '500' } },
    );
    expect(code).toBe(0);
    const grandchild = Number(readFileSync(path.join(workdir, 'grandchild.pid'), 'utf8'));
    expect(pidGone(grandchild)).toBe(true);
    expect(fake.reports[0]!.timedOut).toBe(true);
    expect(fake.reports[0]!.exitCode).toBe(128 + 9);
  });

  it('terminates processes a successful task left running in its group', async () => {
    const { fake, code, workdir } = await runAgent({
      spec: defaultSpec({
        command:
          '(trap "" HUP; exec sleep 300) > /dev/null 2>&1 & echo $! > straggler.pid; echo main-done',
      }),
    });
    expect(code).toBe(0);
    const straggler = Number(readFileSync(path.join(workdir, 'straggler.pid'), 'utf8'));
    expect(pidGone(straggler)).toBe(true);
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
    expect(fake.lines(LogStream.AGENT).some((l) => l.includes('left running'))).toBe(true);
  });

  it('reports FAILED with 127 when the interpreter cannot be started', async () => {
    const { fake, code } = await runAgent(
      { spec: defaultSpec({ type: TaskType.PYTHON, command: 'print(1)\n' }) },
      { env: { LEOFLOW_PYTHON: '/nonexistent/python3' } },
    );
    expect(code).toBe(0);
    expect(fake.reports[0]!.state).toBe(ReportedState.FAILED);
    expect(fake.reports[0]!.exitCode).toBe(127);
    expect(fake.reports[0]!.errorMessage).toBe('task could not be started: ENOENT');
  });

  it('reports FAILED for a task type it does not know', async () => {
    const { fake, code } = await runAgent({ spec: defaultSpec({ type: TaskType.UNSPECIFIED }) });
    expect(code).toBe(0);
    expect(fake.count('Heartbeat')).toBe(0);
    expect(fake.reports[0]!.state).toBe(ReportedState.FAILED);
    expect(fake.reports[0]!.errorMessage).toBe('unsupported task type 0');
  });
});

describe('agent session key (post-exp reports are bound to it)', () => {
  it('binds one random key at Register and sends it on every call; the task never sees it', async () => {
    const { fake, code, workdir } = await runAgent({
      spec: defaultSpec({ command: 'env > env.txt; echo done' }),
    });
    expect(code).toBe(0);
    const key = fake.registers[0]!.sessionKey;
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(fake.calls.length).toBeGreaterThan(2);
    expect(fake.calls.every((c) => c.session === key)).toBe(true);
    expect(readFileSync(path.join(workdir, 'env.txt'), 'utf8')).not.toContain(key);
  });

  it('a Register answered should_terminate runs nothing and exits 2', async () => {
    const { fake, code, workdir } = await runAgent({
      spec: defaultSpec({ command: 'touch ran' }),
      register: () => ({ shouldTerminate: true, terminateReason: 'superseded' }),
    });
    expect(code).toBe(2);
    expect(fake.count('GetTaskSpec')).toBe(0);
    expect(fake.reports).toHaveLength(0);
    expect(() => readFileSync(path.join(workdir, 'ran'))).toThrow();
  });
});
