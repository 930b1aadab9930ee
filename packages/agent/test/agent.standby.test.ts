import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LogStream, ReportedState } from '@leoflow/protocol';
import {
  defaultSpec,
  fail,
  pipedSpec,
  type FakeAgentService,
} from './support/fake-agent-service.js';
import { Code } from '@connectrpc/connect';
import { TOKEN, useHarness } from './support/harness.js';
import { assign, STANDBY_ENV, waitFor, type RunningAgent } from './support/spawn-agent.js';

const { tempDir, startFake, start, standbyAgent } = useHarness();

/** A connected standby agent, then handed token + `spec` for ti-1 on its pipe. */
async function standbyHandedSpec(
  fake: FakeAgentService,
  spec: Parameters<typeof defaultSpec>[0],
): Promise<{ agent: RunningAgent; workdir: string }> {
  const workdir = tempDir();
  const agent = await standbyAgent(fake);
  assign(agent, { token: TOKEN, task_instance_id: 'ti-1', workdir, spec: pipedSpec(spec) });
  return { agent, workdir };
}

/**
 * A standby agent is started before it has an attempt and holds no credential; the executor
 * later writes the whole assignment (token, task instance, workdir) on fd 3.
 */
describe('agent process: standby', () => {
  it('boots and connects without a credential, then runs the assigned attempt', async () => {
    const fake = await startFake({ spec: defaultSpec({ command: 'echo assigned' }) });
    const workdir = tempDir();
    const agent = start({
      url: fake.url,
      token: '',
      workdir: '',
      holdTokenPipe: true,
      env: STANDBY_ENV,
    });
    // Idle: the warm-up opens the connection and rehearses its first calls WITHOUT a bearer, so
    // the gate refuses each and no handler sees a call.
    await waitFor(
      () => fake.anonymousRefused.length >= 4,
      10_000,
      'the standby agent to rehearse its first calls',
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(fake.calls).toHaveLength(0);
    expect([...fake.anonymousRefused].sort()).toEqual(
      ['GetConnections', 'GetVariables', 'Heartbeat', 'Register'].sort(),
    );

    (agent.child.stdio[3] as Writable).end(
      JSON.stringify({ token: TOKEN, task_instance_id: 'ti-1', workdir }),
    );
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(0);
    expect(fake.reports[0]?.state).toBe(ReportedState.SUCCESS);
    expect(fake.calls.every((c) => c.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(fake.calls[0]?.method).toBe('Register');
    // the warm-up connection is the one the attempt used
    expect(fake.sessionsOpened).toBe(1);
    expect(agent.diagnostics()).not.toContain(TOKEN);
  });

  it('starts on the newline that ends the assignment, with the executor end still open, and closes fd 3 before the task', async () => {
    // The task lists its own descriptors: fd 3 (the token pipe) must not be among them. (It
    // cannot look at its agent's any more: the sandbox's Landlock scoping denies it
    // /proc/<agent>/fd; and fd 3 of the agent is soon a new socket of its own.)
    const fake = await startFake({
      // (stat each number: a glob would open the directory and show its own descriptor)
      spec: defaultSpec({
        command: 'for f in $(seq 0 64); do [ -e /proc/$$/fd/$f ] && echo "fd $f"; done; true',
      }),
    });
    const workdir = tempDir();
    const agent = await standbyAgent(fake);
    const pipe = agent.child.stdio[3] as Writable;
    // write, not end: the executor's end of the pipe stays open for the whole attempt
    // what follows the newline, in the same write, is not part of the message
    pipe.write(`${JSON.stringify({ token: TOKEN, task_instance_id: 'ti-1', workdir })}\nNOT-READ`);
    try {
      const { code } = await agent.exited;
      expect(code, agent.diagnostics()).toBe(0);
      expect(fake.reports[0]?.state).toBe(ReportedState.SUCCESS);
      // the agent closed its end before spawning the task: the task holds only 0-2
      expect(fake.lines(LogStream.STDOUT)).toEqual(['fd 0', 'fd 1', 'fd 2']);
    } finally {
      pipe.destroy();
    }
  });

  it('exits quietly when released with an empty assignment', async () => {
    const fake = await startFake({ spec: defaultSpec({ command: 'true' }) });
    const agent = await standbyAgent(fake);
    (agent.child.stdio[3] as Writable).end();
    const { code } = await agent.exited;
    expect(code).toBe(0);
    expect(fake.registers).toHaveLength(0);
    expect(fake.reports).toHaveLength(0);
  });

  it('refuses a standby assignment that does not name its attempt', async () => {
    const fake = await startFake({ spec: defaultSpec({ command: 'true' }) });
    const agent = start({
      url: fake.url,
      token: '',
      workdir: '',
      holdTokenPipe: true,
      env: STANDBY_ENV,
    });
    (agent.child.stdio[3] as Writable).end(JSON.stringify({ token: TOKEN }));
    const { code } = await agent.exited;
    expect(code).toBe(2);
    expect(fake.registers).toHaveLength(0);
    expect(agent.diagnostics()).not.toContain(TOKEN);
  });

  it('runs the spec it was handed with its token and never calls GetTaskSpec', async () => {
    // The server's own spec differs and GetTaskSpec fails: only the piped one can run.
    const fake = await startFake({
      spec: defaultSpec({ command: 'echo from-rpc' }),
      getTaskSpec: () => fail(Code.PermissionDenied, 'GetTaskSpec must not be called'),
      xcoms: { up: 'upstream-value' },
    });
    const { agent } = await standbyHandedSpec(fake, {
      command: 'echo "from-pipe $LEOFLOW_XCOM_UP"',
      dependsOn: ['up'],
    });
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(0);
    expect(fake.count('GetTaskSpec')).toBe(0);
    expect(fake.calls[0]?.method).toBe('Register');
    expect(fake.lines(LogStream.STDOUT)).toEqual(['from-pipe upstream-value']);
    expect(fake.reports.map((r) => r.state)).toEqual([ReportedState.SUCCESS]);
    expect(agent.diagnostics()).not.toContain(TOKEN);
  });

  it('a piped spec for a try that was superseded runs nothing: Register says stop first', async () => {
    const fake = await startFake({
      spec: defaultSpec({ command: 'true' }),
      register: () => ({ shouldTerminate: true, terminateReason: 'superseded' }),
      variables: { v: 'secret-value' },
      connections: { c: 'postgres://u:p@h/db' },
    });
    const { agent, workdir } = await standbyHandedSpec(fake, {
      command: 'touch TASK_RAN',
      dependsOn: ['up'],
    });
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(2);
    // Register was the only call: no spec, secret or XCom was asked for, nothing reported.
    expect(fake.calls.map((c) => c.method)).toEqual(['Register']);
    expect(existsSync(path.join(workdir, 'TASK_RAN'))).toBe(false);
    expect(agent.diagnostics()).toContain('the server says stop before starting: superseded');
  });

  it('refuses a piped spec for another task instance before any call', async () => {
    const fake = await startFake({ spec: defaultSpec({ command: 'true' }) });
    const { agent, workdir } = await standbyHandedSpec(fake, {
      command: 'touch TASK_RAN',
      taskInstanceId: 'ti-other',
    });
    const { code } = await agent.exited;
    expect(code).toBe(2);
    expect(fake.calls).toHaveLength(0);
    expect(existsSync(path.join(workdir, 'TASK_RAN'))).toBe(false);
    expect(agent.diagnostics()).toContain('not for the task instance the assignment names');
    expect(agent.diagnostics()).not.toContain(TOKEN);
  });
});
