import { afterEach, expect, it } from 'vitest';
import { revokeAttemptCredential } from '../../src/attempts/revocation.js';
import type { StopAttempt } from '../../src/scheduler/run-operations.js';
import { access, heartbeat, report, setupVaultAndDag, startAttempt } from '../attempts/support.js';
import { forEachDialect } from '../support/dialects.js';
import { createHarness, type Harness } from '../support/harness.js';

/**
 * Mark success / failed on the store and the scheduler (issue 43, item 4), both dialects. The
 * credential half is two-sided and runs under secret_liveness_mode=observe, where an attempt
 * that is no longer live would otherwise still resolve secrets: the marked task's running
 * attempt is stopped and can no longer fetch a secret, while the attempt of the same task in
 * another run, not marked, still can.
 */
forEachDialect('mark success / failed (store and scheduler)', (dialect) => {
  let h: Harness;
  afterEach(async () => {
    await h?.close();
  });

  const stop: StopAttempt = async (ti) => {
    await revokeAttemptCredential(
      {
        store: h.store,
        clock: h.clock,
        executors: h.executors,
        evictAttempt: (id, t) => h.verifier.evictAttempt(id, t),
        livenessMode: 'observe',
      },
      { taskInstance: ti, terminate: true },
    );
  };

  async function runIdOf(taskInstanceId: string): Promise<string> {
    const ti = await h.store.getTaskInstanceById(taskInstanceId);
    const run = await h.store.getRunById(ti!.dag_run_id);
    return run!.run_id;
  }

  it("a marked task's running attempt is stopped and fetches no secret; the unmarked one beside it still does", async () => {
    h = await createHarness({ dialect, scoping: 'enforce', liveness: 'observe' });
    await setupVaultAndDag(h);
    const marked = await startAttempt(h);
    const other = await startAttempt(h);
    expect(await access(h, marked.token)).toBe('delivered');
    expect(await access(h, other.token)).toBe('delivered');

    const out = await h.runs.mark(
      'default',
      'cred',
      await runIdOf(marked.identity.task_instance_id),
      { taskIds: ['t'], state: 'success', downstream: false, upstream: false },
      stop,
    );
    expect(out.marked).toEqual(['t']);
    expect((await h.store.getTaskInstanceById(marked.identity.task_instance_id))?.state).toBe(
      'success',
    );
    expect(await access(h, marked.token)).toBe('denied');
    expect(h.executor.terminated).toEqual([`${marked.identity.task_instance_id}#1`]);
    // the stopped attempt's late report changes nothing: the mark stands
    await report(h, marked.token, 'failed', marked.session).catch(() => undefined);
    expect((await h.store.getTaskInstanceById(marked.identity.task_instance_id))?.state).toBe(
      'success',
    );
    // the other side: the same task's attempt in the other run is untouched
    expect(await access(h, other.token)).toBe('delivered');
    expect((await heartbeat(h, other.token, other.session))?.shouldTerminate).toBe(false);
    expect((await h.store.getTaskInstanceById(other.identity.task_instance_id))?.state).toBe(
      'running',
    );
  });

  it('a finished run goes back to the scheduler, which decides its state from the marks', async () => {
    h = await createHarness({ dialect });
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    const runId = await runIdOf(a.identity.task_instance_id);
    await report(h, a.token, 'failed', a.session);
    await h.scheduler.tick();
    expect((await h.store.getRun('default', 'cred', runId))?.state).toBe('failed');

    const out = await h.runs.mark(
      'default',
      'cred',
      runId,
      { taskIds: ['t'], state: 'success', downstream: false, upstream: false },
      stop,
    );
    expect(out.marked).toEqual(['t']);
    expect(out.run.state).toBe('queued');
    expect(h.executor.terminated).toEqual([]); // nothing was live
    await h.scheduler.tick();
    await h.scheduler.tick();
    expect((await h.store.getRun('default', 'cred', runId))?.state).toBe('success');
    expect(h.executor.take()).toEqual([]); // marking runs nothing
  });

  it('bad input writes nothing: an unknown state, an unknown task, a run of another DAG', async () => {
    h = await createHarness({ dialect });
    await setupVaultAndDag(h);
    const run = await h.runs.trigger('default', 'cred', {});
    const before = await h.store.listTaskInstances(run.id);
    await expect(
      h.runs.mark(
        'default',
        'cred',
        run.run_id,
        { taskIds: ['t'], state: 'running', downstream: false, upstream: false },
        stop,
      ),
    ).rejects.toMatchObject({ code: 'LF_MARK_BAD_STATE' });
    await expect(
      h.runs.mark(
        'default',
        'cred',
        run.run_id,
        { taskIds: ['t', 'nope'], state: 'success', downstream: true, upstream: false },
        stop,
      ),
    ).rejects.toMatchObject({ code: 'LF_TASK_NOT_FOUND' });
    await expect(
      h.runs.mark(
        'default',
        'other',
        run.run_id,
        { taskIds: null, state: 'success', downstream: false, upstream: false },
        stop,
      ),
    ).rejects.toMatchObject({ code: 'LF_RUN_NOT_FOUND' });
    expect(await h.store.listTaskInstances(run.id)).toEqual(before);
    expect((await h.store.getRunById(run.id))?.state).toBe(run.state);
  });
  it('fenced: when the attempt ends between the read and the write, the write does not apply and the mark is made on the state it ended in', async () => {
    h = await createHarness({ dialect });
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    const runId = await runIdOf(a.identity.task_instance_id);
    const update = h.store.updateTaskInstance.bind(h.store);
    let raced = false;
    const seen: boolean[] = [];
    h.store.updateTaskInstance = async (id, expect_, patch, now) => {
      if (!raced && patch.state === 'success') {
        raced = true;
        // the agent's own report lands first: the row leaves running
        await report(h, a.token, 'failed', a.session);
      }
      const applied = await update(id, expect_, patch, now);
      if (patch.state === 'success') seen.push(applied);
      return applied;
    };
    const out = await h.runs.mark(
      'default',
      'cred',
      runId,
      { taskIds: ['t'], state: 'success', downstream: false, upstream: false },
      stop,
    );
    expect(raced).toBe(true);
    // the write read in `running` did not apply; the one read in `failed` did
    expect(seen).toEqual([false, true]);
    expect(out.marked).toEqual(['t']);
    expect((await h.store.getTaskInstanceById(a.identity.task_instance_id))?.state).toBe('success');
  });
});
