/**
 * An unacked assignment going back to the queue (its requeue fence: the row moves to the next
 * dispatch generation) while the attempt is stopped (revoke --terminate, or the reaper). Whatever
 * order the writes land in, the stop wins or the requeue is fenced: the attempt ends, it is not
 * handed to a runner again, and no token minted for it (the unacked one, a re-assignment's)
 * resolves anything. The order is driven by holding the requeue fence's store write until the
 * stop has reached the broker (or letting it land first); the real scheduler, broker, agent
 * service and store, on a ManualClock.
 */
import { createHash } from 'node:crypto';
import { Code, ConnectError } from '@connectrpc/connect';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { WorkerEvent } from '../../../src/executor/assignments/assignment-broker.js';
import { revokeAttemptCredential } from '../../../src/attempts/revocation.js';
import { DEFAULT_RUNNER_WAIT_MS } from '../../../src/executor/runner-executor.js';
import { createHarness, spec, task, type Harness } from '../../support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function codeOf(p: Promise<unknown>): Promise<Code | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    return ConnectError.from(e).code;
  }
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

async function setup() {
  const harness = await createHarness({
    runners: () => Promise.resolve(undefined),
    liveness: 'enforce',
  });
  h = harness;
  await harness.vault.setVariable('default', 'canary', 'v-canary', { secret: true }, 0);
  const s = spec({
    dag_id: 'rqc',
    tasks: [task('t', { executor: 'runner', variables: ['canary'] })],
  });
  const hash = createHash('sha256').update(JSON.stringify(s)).digest('hex');
  await harness.store.putDagVersion('default', s, hash, harness.clock.now());
  const run = await harness.runs.trigger('default', 'rqc', {});
  await harness.scheduler.tick();
  const events: WorkerEvent[] = [];
  const sent = deferred();
  harness.broker!.attach({
    id: 'w1',
    tenant_id: 'default',
    labels: {},
    slots: 1,
    send: (e) => {
      events.push(e);
      if (e.kind === 'assignment') sent.resolve();
    },
  });
  await sent.promise;
  const assignments = () => events.flatMap((e) => (e.kind === 'assignment' ? [e] : []));
  const ti = async () => (await harness.store.listTaskInstances(run.id))[0]!;

  // The requeue fence's write (a patch of dispatch_gen alone) is held until `land` is called.
  const update = harness.store.updateTaskInstance.bind(harness.store);
  const gate = deferred();
  const refenced = deferred();
  let refenceResult: boolean | undefined;
  harness.store.updateTaskInstance = async (id, expectation, patch, now) => {
    const isRefence = Object.keys(patch).length === 1 && 'dispatch_gen' in patch;
    if (!isRefence) return update(id, expectation, patch, now);
    await gate.promise;
    try {
      refenceResult = await update(id, expectation, patch, now);
      return refenceResult;
    } finally {
      refenced.resolve();
    }
  };
  const stop = async () =>
    revokeAttemptCredential(
      {
        store: harness.store,
        clock: harness.clock,
        executors: harness.executors,
        evictAttempt: (id, tryNumber) => harness.verifier.evictAttempt(id, tryNumber),
      },
      { taskInstance: await ti(), terminate: true },
    );
  const land = async () => {
    gate.resolve();
    await refenced.promise;
    return refenceResult;
  };
  // Resolves once the stop has reached the broker (the attempt left the queue).
  const cancelled = deferred();
  const cancel = harness.broker!.cancel.bind(harness.broker);
  harness.broker!.cancel = (...args) => {
    const found = cancel(...args);
    cancelled.resolve();
    return found;
  };
  /** the assignment goes unacked past its deadline: the requeue starts, its write held */
  const expire = async () => {
    harness.clock.advance(30_000);
    await harness.runnerExecutor!.reconcile();
  };
  return { h: harness, events, assignments, ti, stop, land, expire, cancelled: cancelled.promise };
}

const failed = async (s: Awaited<ReturnType<typeof setup>>) =>
  vi.waitFor(async () => expect((await s.ti()).state).toBe('failed'), {
    timeout: 2_000,
    interval: 5,
  });

/** What must hold at the end, in every order: no token of the attempt runs anything. */
async function expectNothingRuns(s: Awaited<ReturnType<typeof setup>>) {
  const row = await s.ti();
  expect(row.state).toBe('failed');
  expect(row.try_number).toBe(1);
  // nothing is handed out again, nothing waits in the queue or on a runner
  await s.h.runnerExecutor!.reconcile();
  await s.h.scheduler.tick();
  expect(s.h.executor.take()).toEqual([]);
  expect(s.h.broker!.waiting).toBe(0);
  expect(s.h.broker!.held).toBe(0);
  for (const a of s.assignments()) {
    const agent = s.h.agent(a.attempt_token);
    // refused outright (a token past its exp) or answered with a refusal
    const ack = await agent.ackAssignment({ assignmentId: a.assignment_id }).catch(() => undefined);
    expect(ack?.accepted ?? false).toBe(false);
    const reg = await agent
      .register({ agentVersion: 't', hostname: 'r', pid: 1 })
      .catch(() => undefined);
    expect(reg?.shouldTerminate ?? true).toBe(true);
    expect(await codeOf(agent.getVariables({}))).not.toBe('ok');
  }
}

describe('requeue fence vs a user stop of the same attempt', () => {
  it('the attempt ends while the requeue write is in flight: that write is fenced out', async () => {
    const s = await setup();
    await s.expire();
    // the reaper fails the claim (dispatch_lost, past the runner wait) and then stops it: its
    // write lands first
    s.h.clock.advance(DEFAULT_RUNNER_WAIT_MS);
    const ticked = s.h.scheduler.tick();
    await s.cancelled;
    expect((await s.ti()).state).toBe('failed');
    expect(await s.land()).toBe(false);
    await ticked;
    expect((await s.ti()).error_message).toMatch(/^dispatch_lost/);
    expect(s.assignments()).toHaveLength(1);
    await expectNothingRuns(s);
  });

  it('the stop reaches the queue while the requeue write is in flight: it still ends the attempt at once', async () => {
    const s = await setup();
    const { dispatch_gen } = await s.ti();
    await s.expire();
    const stopped = s.stop();
    await s.cancelled; // the attempt has left the queue; the requeue write has not landed
    expect(await s.land()).toBe(true);
    expect((await s.ti()).dispatch_gen).toBe(dispatch_gen + 1);
    await stopped;
    await failed(s);
    expect((await s.ti()).error_message).toMatch(/^LF_RUNNER_CANCELLED/);
    expect(s.assignments()).toHaveLength(1);
    await expectNothingRuns(s);
  });

  it('the requeue lands first and is handed out again: the stop cancels it there; no token runs', async () => {
    const s = await setup();
    await s.expire();
    expect(await s.land()).toBe(true);
    await vi.waitFor(() => expect(s.assignments()).toHaveLength(2), {
      timeout: 2_000,
      interval: 5,
    });
    await s.stop();
    const again = s.assignments()[1]!;
    expect(s.events.at(-1)).toMatchObject({
      kind: 'cancellation',
      assignment_id: again.assignment_id,
    });
    // the runner never acked it, so nobody reports: the claim ends as dispatch_lost, no retry
    s.h.clock.advance(180_001);
    await s.h.scheduler.tick();
    expect((await s.ti()).error_message).toMatch(/dispatch_lost/);
    await expectNothingRuns(s);
  });
});
