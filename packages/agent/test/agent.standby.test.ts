import type { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ReportedState } from '@leoflow/protocol';
import { defaultSpec } from './support/fake-agent-service.js';
import { TOKEN, useHarness } from './support/harness.js';
import { waitFor } from './support/spawn-agent.js';

const { tempDir, startFake, start } = useHarness();

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
      env: { LEOFLOW_AGENT_STANDBY: '1', LEOFLOW_TASK_INSTANCE_ID: '', LEOFLOW_WORKDIR: '' },
    });
    // Idle: the warm-up opens the connection but sends no call, with or without a credential.
    await waitFor(
      () => fake.sessionsOpened > 0,
      10_000,
      'the standby agent to open its connection',
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(fake.calls).toHaveLength(0);

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

  it('exits quietly when released with an empty assignment', async () => {
    const fake = await startFake({ spec: defaultSpec({ command: 'true' }) });
    const agent = start({
      url: fake.url,
      token: '',
      workdir: '',
      holdTokenPipe: true,
      env: { LEOFLOW_AGENT_STANDBY: '1', LEOFLOW_TASK_INSTANCE_ID: '', LEOFLOW_WORKDIR: '' },
    });
    await waitFor(
      () => fake.sessionsOpened > 0,
      10_000,
      'the standby agent to open its connection',
    );
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
      env: { LEOFLOW_AGENT_STANDBY: '1', LEOFLOW_TASK_INSTANCE_ID: '', LEOFLOW_WORKDIR: '' },
    });
    (agent.child.stdio[3] as Writable).end(JSON.stringify({ token: TOKEN }));
    const { code } = await agent.exited;
    expect(code).toBe(2);
    expect(fake.registers).toHaveLength(0);
    expect(agent.diagnostics()).not.toContain(TOKEN);
  });
});
