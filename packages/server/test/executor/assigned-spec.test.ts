import { createHash } from 'node:crypto';
import { mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, equals, fromBinary } from '@bufbuild/protobuf';
import { ReportedState, TaskSpecSchema } from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { assignmentPayload, MAX_PIPED_SPEC_BYTES } from '../../src/executor/subprocess-executor.js';
import { pipeDumpExecutor, pipeDumpLaunch } from './pipe-dump.js';
import { createHarness, spec, task, type Harness } from '../support/harness.js';

let h: Harness | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'leoflow-assigned-spec-'));
  dirs.push(d);
  return d;
}

async function pushDag(harness: Harness) {
  const s = spec({
    dag_id: 'handoff',
    params: { region: 'eu', size: 1 },
    tasks: [
      task('up'),
      task('down', {
        depends_on: ['up'],
        command: 'echo "$GREETING"',
        env: { GREETING: 'hi', LEOFLOW_FORGED: 'x', leoflow_lower: 'y' },
        execution_timeout_seconds: 30,
        do_xcom_push: true,
      }),
    ],
  });
  await harness.store.putDagVersion(
    'default',
    s,
    createHash('sha256').update(JSON.stringify(s)).digest('hex'),
    harness.clock.now(),
  );
}

describe('the spec handed over at dispatch', () => {
  it('is exactly what GetTaskSpec answers the same attempt, author LEOFLOW_* env dropped', async () => {
    h = await createHarness();
    await pushDag(h);
    await h.runs.trigger('default', 'handoff', { conf: { size: 3 } });
    await h.scheduler.tick();
    const [launch] = h.executor.take();
    expect(launch?.agentSpec).toBeDefined();
    const agent = h.agent(launch!.token);
    await agent.register({ agentVersion: 't', hostname: 'h', pid: 1, sessionKey: 's-up' });
    const served = (await agent.getTaskSpec({})).spec!;
    expect(equals(TaskSpecSchema, launch!.agentSpec!, served)).toBe(true);
    expect(launch!.agentSpec!.taskInstanceId).toBe(launch!.identity.task_instance_id);
    expect(JSON.parse(launch!.agentSpec!.paramsJson)).toEqual({ region: 'eu', size: 3 });

    // the downstream's spec: the author's LEOFLOW_* keys are not in it, in any case
    await agent.reportState({ state: ReportedState.SUCCESS, exitCode: 0 });
    await h.scheduler.tick();
    const [down] = h.executor.take();
    expect(down?.agentSpec?.taskId).toBe('down');
    expect(down!.agentSpec!.env).toEqual({ GREETING: 'hi' });
    const downAgent = h.agent(down!.token);
    await downAgent.register({ agentVersion: 't', hostname: 'h', pid: 2, sessionKey: 's-dn' });
    expect(equals(TaskSpecSchema, down!.agentSpec!, (await downAgent.getTaskSpec({})).spec!)).toBe(
      true,
    );
  });

  it('travels on a standby agent’s pipe with its token, in the TaskSpec binary form', async () => {
    const dir = tempDir();
    const { executor, exited, payload: dumped } = pipeDumpExecutor(dir, { standbyAgents: 1 });
    try {
      const agentSpec = create(TaskSpecSchema, {
        taskId: 'down',
        taskInstanceId: 'ti-handoff',
        command: 'echo piped',
        env: { GREETING: 'hi' },
      });
      const started = await executor.start(pipeDumpLaunch('ti-handoff', { agentSpec }));
      await exited;
      const payload = dumped();
      expect(payload.token).toBe('tok.for.ti-handoff');
      expect(payload.task_instance_id).toBe('ti-handoff');
      expect(payload.workdir).toBe(join(dir, 'work', 'ti-handoff-try1'));
      const piped = fromBinary(TaskSpecSchema, Buffer.from(payload.spec!, 'base64'));
      expect(equals(TaskSpecSchema, piped, agentSpec)).toBe(true);
      expect(started.pid).toBeGreaterThan(0);
      // it was the standby agent that took it (its diagnostics file is linked to the attempt)
      expect(readlinkSync(join(dir, 'agents', 'ti-handoff-try1.log'))).toMatch(/standby-/);
    } finally {
      await executor.close();
    }
  });

  it('stays off the pipe when it is too large; the agent then asks GetTaskSpec', () => {
    const small = create(TaskSpecSchema, { taskInstanceId: 'ti', command: 'true' });
    const big = create(TaskSpecSchema, {
      taskInstanceId: 'ti',
      command: 'x'.repeat(MAX_PIPED_SPEC_BYTES),
    });
    const withSmall = JSON.parse(assignmentPayload('t', 'ti', '/w', small)) as { spec?: string };
    expect(withSmall.spec).toBeDefined();
    const withBig = JSON.parse(assignmentPayload('t', 'ti', '/w', big)) as { spec?: string };
    expect(withBig).toEqual({ token: 't', task_instance_id: 'ti', workdir: '/w' });
    expect(JSON.parse(assignmentPayload('t', 'ti', '/w', undefined))).toEqual(withBig);
  });
});
