import { create } from '@bufbuild/protobuf';
import { LogStream, PushLogsRequestSchema } from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { setupVaultAndDag } from './support.js';

/**
 * Issue 34: the control plane masks again on write for an attempt whose agent does not mask its
 * output (an agent older than the field RegisterRequest.masks_secrets), with the masker built
 * from the values its attempt was delivered. An agent that masks is trusted to (one masker,
 * beside the task).
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const CANARY = 'canary-masked-on-write-3b7d';

async function attempt(masksSecrets: boolean) {
  h = await createHarness({ scoping: 'enforce', liveness: 'enforce' });
  await setupVaultAndDag(h);
  await h.vault.setVariable('default', 'v1', CANARY, { secret: true }, h.clock.now());
  await h.runs.trigger('default', 'cred', {});
  await h.scheduler.tick();
  const [launch] = h.executor.take();
  const agent = h.agent(launch!.token, 'key');
  await agent.register({
    agentVersion: 'old',
    hostname: 'h',
    pid: 1,
    sessionKey: 'key',
    prefetch: true, // the delivery the record names
    masksSecrets,
  });
  return { agent, launch: launch! };
}

const lines = (...messages: string[]) =>
  create(PushLogsRequestSchema, {
    lines: messages.map((message, i) => ({
      lineNumber: BigInt(i + 1),
      timeMs: 1n,
      stream: LogStream.STDOUT,
      message,
    })),
  });

describe('masking on write', () => {
  it('an agent that does not mask: its lines and XCom are masked (raw and encoded) before they are stored', async () => {
    const { agent, launch } = await attempt(false);
    await agent.pushLogs(
      lines(
        `token ${CANARY}`,
        `b64 ${Buffer.from(CANARY).toString('base64')}`,
        'nothing secret here',
      ),
    );
    const stored = await h.store.readLogs(launch.identity.dag_run_id, 't', 1, 0, 10);
    expect(stored.map((l) => l.message)).toEqual(['token ***', 'b64 ***', 'nothing secret here']);
    await agent.pushXCom({
      key: 'return_value',
      value: new TextEncoder().encode(JSON.stringify({ leaked: CANARY })),
    });
    const x = await h.store.getXCom(launch.identity.dag_run_id, 't', 'return_value');
    expect(new TextDecoder().decode(x!.value)).toBe('{"leaked":"***"}');
  });

  it('an agent that masks (this build) is trusted to: the control plane stores what it sent', async () => {
    const { agent, launch } = await attempt(true);
    await agent.pushLogs(lines(`already masked by the agent, or not: ${CANARY}`));
    const stored = await h.store.readLogs(launch.identity.dag_run_id, 't', 1, 0, 10);
    expect(stored.map((l) => l.message)).toEqual([
      `already masked by the agent, or not: ${CANARY}`,
    ]);
  });
});
