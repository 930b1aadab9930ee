import { create } from '@bufbuild/protobuf';
import { LogStream, PushLogsRequestSchema } from '@leoflow/protocol';
import { afterEach, expect, it } from 'vitest';
import { requeueFence } from '../../src/executor/assignments/requeue-fence.js';
import { LOG_CAP_NOTE_LINE } from '../../src/rpc/log-limits.js';
import { DEFAULT_LOG_LIMITS } from '../../src/config/log-limits.js';
import { forEachDialect } from '../support/dialects.js';
import { createHarness, type Harness } from '../support/harness.js';
import {
  bindSessionOfQueued,
  codeOf,
  setupVaultAndDag,
  startAttempt,
  supersedeAfterNextFenceRead,
} from './support.js';

/**
 * docs/credentials.md, "Which RPC checks what": PushLogs is never stored for a try a later one
 * superseded. The fence reads the row before the write; here the try is superseded between that
 * read and the append (a retry bumping the try; a requeue moving a queued try to the next
 * dispatch generation), by running the superseding write when the fence's read returns, before
 * PushLogs continues. Nothing of the old attempt may land.
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const batch = (message: string) =>
  create(PushLogsRequestSchema, {
    lines: [
      { lineNumber: 1n, timeMs: 1n, stream: LogStream.STDOUT, message: `${message} 1` },
      { lineNumber: 2n, timeMs: 2n, stream: LogStream.STDOUT, message: `${message} 2` },
    ],
  });

forEachDialect('PushLogs superseded between its fence read and its append', (dialect) => {
  it('a retry: the old try gets FailedPrecondition and none of its lines are stored', async () => {
    h = await createHarness({ dialect });
    await setupVaultAndDag(h, { retries: 1 });
    const first = await startAttempt(h);
    const id = first.identity.task_instance_id;
    const run = first.identity.dag_run_id;
    // unraced, the live try's lines land
    expect(await codeOf(h.agent(first.token).pushLogs(batch('live')))).toBe('ok');
    const race = supersedeAfterNextFenceRead(h, async () => {
      const bumped = await h.store.archiveAndBumpTry(
        id,
        { states: ['running'], try_number: 1 },
        'failed',
        { state: 'queued' },
        h.clock.now(),
      );
      expect(bumped).toBe(true);
    });
    const late = create(PushLogsRequestSchema, {
      lines: [{ lineNumber: 3n, timeMs: 3n, stream: LogStream.STDOUT, message: 'stale 3' }],
    });
    expect(await codeOf(h.agent(first.token).pushLogs(late))).toBe('FailedPrecondition');
    expect(race.ran()).toBe(true);
    expect((await h.store.readLogs(run, 't', 1, 0, 100)).map((l) => l.message)).toEqual([
      'live 1',
      'live 2',
    ]);
    expect(await h.store.readLogs(run, 't', 2, 0, 100)).toEqual([]);
  });

  it("a requeue: the old generation's lines are not stored under the try the next one runs", async () => {
    h = await createHarness({ dialect });
    await setupVaultAndDag(h);
    await h.runs.trigger('default', 'cred', {});
    await h.scheduler.tick();
    const [queued] = h.executor.take();
    if (!queued) throw new Error('nothing was dispatched');
    await bindSessionOfQueued(h, queued.token);
    const { try_number, dag_run_id } = queued.identity;
    const gen = queued.identity.dispatch_gen ?? 0;
    const race = supersedeAfterNextFenceRead(h, async () => {
      const next = await requeueFence(h.store, h.clock)({ ...queued.identity, dispatch_gen: gen });
      expect(next).toBe(gen + 1);
    });
    expect(await codeOf(h.agent(queued.token).pushLogs(batch('old generation')))).toBe(
      'FailedPrecondition',
    );
    expect(race.ran()).toBe(true);
    // the next generation runs the same try: its log (and its line numbers) are still its own
    expect(await h.store.readLogs(dag_run_id, 't', try_number, 0, 100)).toEqual([]);
  });

  it("a requeue: the old generation's refused batch does not count against the next one's byte budget", async () => {
    h = await createHarness({
      dialect,
      logLimits: { ...DEFAULT_LOG_LIMITS, maxBytesPerAttempt: 20 },
    });
    await setupVaultAndDag(h);
    await h.runs.trigger('default', 'cred', {});
    await h.scheduler.tick();
    const [queued] = h.executor.take();
    if (!queued) throw new Error('nothing was dispatched');
    await bindSessionOfQueued(h, queued.token);
    const { try_number, dag_run_id } = queued.identity;
    const gen = queued.identity.dispatch_gen ?? 0;
    const race = supersedeAfterNextFenceRead(h, async () => {
      const next = await requeueFence(h.store, h.clock)({ ...queued.identity, dispatch_gen: gen });
      expect(next).toBe(gen + 1);
    });
    // 20 bytes: the whole budget, admitted and then refused by the write's fence
    const full = create(PushLogsRequestSchema, {
      lines: [{ lineNumber: 1n, timeMs: 1n, stream: LogStream.STDOUT, message: 'x'.repeat(20) }],
    });
    expect(await codeOf(h.agent(queued.token).pushLogs(full))).toBe('FailedPrecondition');
    expect(race.ran()).toBe(true);
    const live = await h.tokens.mint({ ...queued.identity, dispatch_gen: gen + 1 }, h.clock.now());
    const own = create(PushLogsRequestSchema, {
      lines: [{ lineNumber: 1n, timeMs: 1n, stream: LogStream.STDOUT, message: 'live 1' }],
    });
    expect(await codeOf(h.agent(live).pushLogs(own))).toBe('ok');
    const stored = await h.store.readLogs(dag_run_id, 't', try_number, 0, LOG_CAP_NOTE_LINE + 1);
    expect(stored.map((l) => l.message)).toEqual(['live 1']);
  });
});
