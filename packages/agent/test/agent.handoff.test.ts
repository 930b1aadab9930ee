import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { create, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import { Code } from '@connectrpc/connect';
import { LogStream, RegisterResponseSchema, ReportedState } from '@leoflow/protocol';
import { describe, expect, it } from 'vitest';
import { defaultSpec, fail, pipedSpec } from './support/fake-agent-service.js';
import { TOKEN, useHarness } from './support/harness.js';
import type { RunningAgent } from './support/spawn-agent.js';
import { REVERSED, unreversed } from './support/unmasked-print.js';

const { tempDir, startFake, standbyAgent } = useHarness();

/** 32 bytes, base64url: the form of key the executor draws for the attempt. */
const HANDED_KEY = Buffer.alloc(32, 7).toString('base64url');

function encoded(answer: MessageInitShape<typeof RegisterResponseSchema>): string {
  return Buffer.from(
    toBinary(RegisterResponseSchema, create(RegisterResponseSchema, answer)),
  ).toString('base64');
}

/** The first message of a hand-off: the assignment, announcing the registration to follow. */
function assignment(
  workdir: string,
  spec: Parameters<typeof defaultSpec>[0],
): Record<string, string> {
  return {
    token: TOKEN,
    task_instance_id: 'ti-1',
    workdir,
    spec: pipedSpec(spec),
    registration: 'follows',
    session_key: HANDED_KEY,
  };
}

/** The hand-off as the executor writes it: the assignment, then the registration, then EOF. */
function handOver(
  agent: RunningAgent,
  assignment: Record<string, string>,
  second: Record<string, string> | 'eof',
): void {
  const pipe = agent.child.stdio[3] as Writable;
  pipe.write(`${JSON.stringify(assignment)}\n`);
  if (second === 'eof') pipe.end();
  else pipe.end(`${JSON.stringify(second)}\n`);
}

/**
 * The subprocess executor registers the attempt for a standby agent at hand-off: it writes the
 * assignment (token, spec, the session key it will bind), registers, then writes Register's answer
 * as a second message (docs/agent.md, "Standby agents"). The agent then makes no Register call:
 * nothing but the task's own start is left between the assignment and the task. Without that
 * second message it registers itself, with the same key.
 */
describe('agent process: registered at hand-off', () => {
  it('makes no Register call, runs with the answer’s secrets and XComs, and every call carries the handed session key', async () => {
    // The server's own answers differ and fail: only what came on the pipe can reach the task.
    const fake = await startFake({
      spec: defaultSpec({ command: 'echo from-rpc' }),
      register: () => fail(Code.PermissionDenied, 'Register must not be called'),
      getTaskSpec: () => fail(Code.PermissionDenied, 'GetTaskSpec must not be called'),
      getVariables: () => fail(Code.PermissionDenied, 'GetVariables must not be called'),
      connections: Code.PermissionDenied,
    });
    const workdir = tempDir();
    const agent = await standbyAgent(fake);
    handOver(
      agent,
      assignment(workdir, {
        command: 'echo "$AIRFLOW_VAR_REGION $AIRFLOW_CONN_WAREHOUSE $LEOFLOW_XCOM_UP"' + REVERSED,
        dependsOn: ['up'],
      }),
      {
        registered: encoded({
          sessionId: 'ti-1',
          heartbeatIntervalSeconds: 15,
          prefetch: {
            variables: { variables: { REGION: 'eu-west' } },
            connections: { connectionUris: { WAREHOUSE: 'postgres://u:p@db/w' } },
            xcoms: {
              upstreams: [
                {
                  upstreamTaskId: 'up',
                  xcom: {
                    found: true,
                    value: Buffer.from('up-value'),
                    contentType: 'text/plain',
                  },
                },
              ],
            },
          },
        }),
      },
    );
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(0);
    expect(unreversed(fake.lines(LogStream.STDOUT))).toEqual([
      'eu-west postgres://u:p@db/w up-value',
    ]);
    for (const method of ['Register', 'GetTaskSpec', 'GetVariables', 'GetConnections', 'FetchXCom'])
      expect(fake.count(method), method).toBe(0);
    expect(fake.reports.map((r) => r.state)).toEqual([ReportedState.SUCCESS]);
    // the report and the log pushes: with the token and the session key the executor bound
    expect(fake.calls.length).toBeGreaterThan(0);
    expect(fake.calls.every((c) => c.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(fake.calls.every((c) => c.session === HANDED_KEY)).toBe(true);
    expect(agent.diagnostics()).not.toContain(TOKEN);
    expect(agent.diagnostics()).not.toContain(HANDED_KEY);
  });

  it('a registration that says stop (the try moved on before the hand-off) runs nothing and makes no call', async () => {
    const fake = await startFake({ spec: defaultSpec({ command: 'true' }) });
    const workdir = tempDir();
    const agent = await standbyAgent(fake);
    handOver(agent, assignment(workdir, { command: 'touch TASK_RAN' }), {
      registered: encoded({
        sessionId: 'ti-1',
        shouldTerminate: true,
        terminateReason: 'the attempt is no longer the live try of its task instance',
      }),
    });
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(2);
    expect(fake.calls).toHaveLength(0);
    expect(existsSync(path.join(workdir, 'TASK_RAN'))).toBe(false);
    expect(agent.diagnostics()).toContain('the server says stop before starting');
  });

  it('a registration without its prefetch (too large for the pipe) asks each part with its own call, still without Register', async () => {
    const fake = await startFake({
      spec: defaultSpec({ command: 'true' }),
      register: () => fail(Code.PermissionDenied, 'Register must not be called'),
      variables: { REGION: 'from-rpc' },
      connections: {},
    });
    const workdir = tempDir();
    const agent = await standbyAgent(fake);
    handOver(agent, assignment(workdir, { command: 'echo "$AIRFLOW_VAR_REGION"' + REVERSED }), {
      registered: encoded({ sessionId: 'ti-1', heartbeatIntervalSeconds: 15 }),
    });
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(0);
    expect(unreversed(fake.lines(LogStream.STDOUT))).toEqual(['from-rpc']);
    expect(fake.count('Register')).toBe(0);
    expect(fake.count('GetVariables')).toBe(1);
    expect(fake.callsOf('GetVariables')[0]?.session).toBe(HANDED_KEY);
  });

  for (const [second, how] of [
    [{ register: 'self' }, 'the executor could not register'],
    ['eof', 'the control plane died between its registration and the second message'],
  ] as const) {
    it(`registers itself with the handed session key when ${how}, and runs`, async () => {
      const fake = await startFake({
        spec: defaultSpec({ command: 'true' }),
        prefetch: 'all',
        variables: { REGION: 'from-register' },
        connections: {},
      });
      const workdir = tempDir();
      const agent = await standbyAgent(fake);
      handOver(
        agent,
        assignment(workdir, { command: 'echo "$AIRFLOW_VAR_REGION"' + REVERSED }),
        second,
      );
      const { code } = await agent.exited;
      expect(code, agent.diagnostics()).toBe(0);
      expect(unreversed(fake.lines(LogStream.STDOUT))).toEqual(['from-register']);
      // Register is idempotent for the key the executor may already have bound
      expect(fake.registers.map((r) => r.sessionKey)).toEqual([HANDED_KEY]);
      expect(fake.calls.every((c) => c.session === HANDED_KEY)).toBe(true);
      expect(fake.reports.map((r) => r.state)).toEqual([ReportedState.SUCCESS]);
      expect(agent.diagnostics()).not.toContain(HANDED_KEY);
    });
  }

  for (const [name, first, second, message] of [
    [
      'a registration announced without its session key',
      { registration: 'follows' },
      { registered: encoded({ sessionId: 'ti-1' }) },
      'without its session key',
    ],
    [
      'a session key without a registration announced',
      { session_key: HANDED_KEY },
      { registered: encoded({ sessionId: 'ti-1' }) },
      'without its session key',
    ],
    [
      'a malformed session key',
      { registration: 'follows', session_key: 'short' },
      { registered: encoded({ sessionId: 'ti-1' }) },
      'not 32 bytes',
    ],
    [
      'a registration that is not a RegisterResponse',
      { registration: 'follows', session_key: HANDED_KEY },
      { registered: 'bm90IGEgbWVzc2FnZQ' },
      'not a RegisterResponse',
    ],
    [
      'a second message that is neither a registration nor "register: self"',
      { registration: 'follows', session_key: HANDED_KEY },
      { something: 'else' },
      'carries no registration',
    ],
    [
      'a registration for another task instance',
      { registration: 'follows', session_key: HANDED_KEY },
      { registered: encoded({ sessionId: 'ti-other' }) },
      'not for the task instance',
    ],
  ] as const) {
    it(`refuses ${name} before any call and runs nothing`, async () => {
      const fake = await startFake({ spec: defaultSpec({ command: 'true' }) });
      const workdir = tempDir();
      const agent = await standbyAgent(fake);
      handOver(
        agent,
        {
          token: TOKEN,
          task_instance_id: 'ti-1',
          workdir,
          spec: pipedSpec({ command: 'touch TASK_RAN' }),
          ...first,
        },
        second,
      );
      const { code } = await agent.exited;
      expect(code).toBe(2);
      expect(fake.calls).toHaveLength(0);
      expect(existsSync(path.join(workdir, 'TASK_RAN'))).toBe(false);
      expect(agent.diagnostics()).toContain(message);
      expect(agent.diagnostics()).not.toContain(TOKEN);
    });
  }
});
