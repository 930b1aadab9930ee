import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_PROTOCOL_VERSION, type AgentProtocolRange } from '@leoflow/protocol';
import { afterEach, expect, it } from 'vitest';
import { defaultServerConfig } from '../../src/config/server-config.js';
import { forEachDialect } from '../support/dialects.js';
import {
  createHarness,
  spec,
  task,
  type Harness,
  type RecordedLaunch,
} from '../support/harness.js';

const AGENT_ENTRY = defaultServerConfig('/unused').subprocess.agentEntry;

interface AgentRun {
  code: number | null;
  output: string;
}

/** Starts the real agent process (the built bundle) for a recorded launch, as the executor would. */
function runRealAgent(h: Harness, launch: RecordedLaunch): Promise<AgentRun> {
  const workdir = join(h.dir, 'work', launch.identity.task_instance_id);
  mkdirSync(workdir, { recursive: true });
  const child = spawn(process.execPath, [AGENT_ENTRY], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      LEOFLOW_AGENT_URL: `http://127.0.0.1:${h.agentPort ?? 0}`,
      LEOFLOW_TASK_INSTANCE_ID: launch.identity.task_instance_id,
      LEOFLOW_WORKDIR: workdir,
      LEOFLOW_BOOTSTRAP_DEADLINE_MS: '20000',
    },
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  (child.stdio[3] as NodeJS.WritableStream).end(
    JSON.stringify({
      token: launch.token,
      task_instance_id: launch.identity.task_instance_id,
      workdir,
    }),
  );
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, output })));
}

forEachDialect('agent protocol skew at Register (real agent process)', (dialect) => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  async function launchOne(agentProtocols?: AgentProtocolRange): Promise<RecordedLaunch> {
    h = await createHarness({
      rpc: 'http2',
      dialect,
      ...(agentProtocols ? { agentProtocols } : {}),
    });
    const s = spec({ dag_id: 'skew', tasks: [task('a', { command: 'echo ran' })] });
    await h.store.putDagVersion('default', s, 'h', h.clock.now());
    await h.runs.trigger('default', 'skew', {});
    await h.scheduler.tick();
    const [launch] = h.executor.take();
    if (launch === undefined) throw new Error('nothing was launched');
    return launch;
  }

  it("an agent of this build's protocol registers and runs its task", async () => {
    const launch = await launchOne();
    const run = await runRealAgent(h!, launch);
    expect(run.code).toBe(0);
    const ti = await h!.store.getTaskInstanceById(launch.identity.task_instance_id);
    expect(ti?.state).toBe('success');
  });

  it('an agent outside the supported range is refused, naming both versions; nothing runs', async () => {
    // A control plane that only accepts a later protocol than this build's agent speaks.
    const newer = AGENT_PROTOCOL_VERSION + 1;
    const launch = await launchOne({ min: newer, max: newer });
    const run = await runRealAgent(h!, launch);
    expect(run.code).toBe(2); // the agent's bootstrap failure exit
    expect(run.output).toContain('LF_AGENT_PROTOCOL_INCOMPATIBLE');
    expect(run.output).toContain(`speaks agent protocol ${AGENT_PROTOCOL_VERSION}`);
    expect(run.output).toContain(`accepts protocol ${newer}`);
    expect(run.output).not.toContain('ran');
    const ti = await h!.store.getTaskInstanceById(launch.identity.task_instance_id);
    // Register wrote nothing: the claim is still queued, never marked running.
    expect(ti?.state).toBe('queued');
  });
});
