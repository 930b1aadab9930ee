import { create } from '@bufbuild/protobuf';
import { PushXComRequestSchema } from '@leoflow/protocol';
import { afterEach, expect, it } from 'vitest';
import { requeueFence } from '../../src/executor/assignments/requeue-fence.js';
import { forEachDialect } from '../support/dialects.js';
import { createHarness, type Harness, type RecordedLaunch } from '../support/harness.js';
import {
  bindSessionOfQueued,
  codeOf,
  setupVaultAndDag,
  supersedeAfterNextFenceRead,
} from './support.js';

/**
 * docs/credentials.md, "Which RPC checks what": PushXCom is stored only for the live try AND
 * dispatch generation. A requeue moves a queued try to the next generation without changing the
 * try number, so an old generation's push must not land: neither plainly after the requeue nor
 * when the requeue lands between PushXCom's fence read and its write (driven here by running the
 * requeue, and the next generation's own push, when the fence's read returns).
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const push = (value: string) =>
  create(PushXComRequestSchema, {
    key: 'return_value',
    value: new TextEncoder().encode(value),
    contentType: 'text/plain',
  });

async function dispatched(): Promise<RecordedLaunch> {
  await h.runs.trigger('default', 'cred', {});
  await h.scheduler.tick();
  const [queued] = h.executor.take();
  if (!queued) throw new Error('nothing was dispatched');
  await bindSessionOfQueued(h, queued.token);
  return queued;
}

/** Requeues the queued try to the next generation; returns a token of that generation. */
async function requeue(old: RecordedLaunch): Promise<string> {
  const gen = old.identity.dispatch_gen ?? 0;
  const next = await requeueFence(h.store, h.clock)({ ...old.identity, dispatch_gen: gen });
  expect(next).toBe(gen + 1);
  return h.tokens.mint({ ...old.identity, dispatch_gen: gen + 1 }, h.clock.now());
}

async function stored(run: string): Promise<string | undefined> {
  const row = await h.store.getXCom(run, 't', 'return_value');
  return row && new TextDecoder().decode(row.value);
}

forEachDialect('PushXCom from a superseded dispatch generation', (dialect) => {
  it("plainly after a requeue: the live generation's value is stored, the old one's refused", async () => {
    h = await createHarness({ dialect });
    await setupVaultAndDag(h);
    const old = await dispatched();
    const live = await requeue(old);
    expect(await codeOf(h.agent(live).pushXCom(push('live')))).toBe('ok');
    expect(await stored(old.identity.dag_run_id)).toBe('live');
    expect(await codeOf(h.agent(old.token).pushXCom(push('stale')))).toBe('FailedPrecondition');
    expect(await stored(old.identity.dag_run_id)).toBe('live');
  });

  it('requeued between its fence read and its write: refused, the live value untouched', async () => {
    h = await createHarness({ dialect });
    await setupVaultAndDag(h);
    const old = await dispatched();
    const race = supersedeAfterNextFenceRead(h, async () => {
      const live = await requeue(old);
      expect(await codeOf(h.agent(live).pushXCom(push('live')))).toBe('ok');
    });
    expect(await codeOf(h.agent(old.token).pushXCom(push('stale')))).toBe('FailedPrecondition');
    expect(race.ran()).toBe(true);
    expect(await stored(old.identity.dag_run_id)).toBe('live');
  });
});
