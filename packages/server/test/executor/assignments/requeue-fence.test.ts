/**
 * An assignment that is not acked by its deadline goes back to the queue, and the token minted
 * for it dies then, not at its exp: the row moves to the next dispatch generation, so that token
 * is refused by Register, AckAssignment and the secret RPCs, while the token of the re-assignment
 * works. The real scheduler, broker, agent service and store, on a ManualClock.
 */
import { createHash } from 'node:crypto';
import { Code, ConnectError } from '@connectrpc/connect';
import { afterEach, describe, expect, it } from 'vitest';
import type { WorkerEvent } from '../../../src/executor/assignments/assignment-broker.js';
import { createHarness, spec, task, type Harness } from '../../support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const flush = () => new Promise((r) => setTimeout(r, 20));

/** Waits (bounded) for what the broker does asynchronously: its mint may take long under load. */
async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function codeOf(p: Promise<unknown>): Promise<Code | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    return ConnectError.from(e).code;
  }
}

async function setup() {
  h = await createHarness({ runners: () => Promise.resolve(undefined), liveness: 'enforce' });
  await h.vault.setVariable('default', 'canary', 'v-canary', { secret: true }, h.clock.now());
  const s = spec({
    dag_id: 'requeue',
    tasks: [task('t', { executor: 'runner', variables: ['canary'] })],
  });
  const hash = createHash('sha256').update(JSON.stringify(s)).digest('hex');
  await h.store.putDagVersion('default', s, hash, h.clock.now());
  const run = await h.runs.trigger('default', 'requeue', {});
  await h.scheduler.tick();
  const events: WorkerEvent[] = [];
  h.broker!.attach({
    id: 'w1',
    tenant_id: 'default',
    labels: {},
    slots: 1,
    send: (e) => events.push(e),
  });
  const assignments = () => events.flatMap((e) => (e.kind === 'assignment' ? [e] : []));
  await until(() => assignments().length === 1, 'the first assignment');
  return { h, events, assignments, ti: async () => (await h!.store.listTaskInstances(run.id))[0]! };
}

const register = { agentVersion: 't', hostname: 'r', pid: 1 };

describe('a requeued assignment', () => {
  it('an ack one ms before the deadline keeps the token working (the live side)', async () => {
    const { h, assignments, ti } = await setup();
    const [first] = assignments();
    h.clock.advance(29_999);
    await h.runnerExecutor!.reconcile();
    await flush();
    const agent = h.agent(first!.attempt_token);
    const ack = await agent.ackAssignment({ assignmentId: first!.assignment_id });
    expect(ack.accepted).toBe(true);
    expect((await agent.register(register)).shouldTerminate).toBe(false);
    expect((await agent.getVariables({})).variables).toEqual({ canary: 'v-canary' });
    expect((await ti()).state).toBe('running');
  });

  it('past the deadline the old token is refused everywhere and the re-assigned one works', async () => {
    const { h, assignments, ti } = await setup();
    const [first] = assignments();
    const genBefore = (await ti()).dispatch_gen;
    h.clock.advance(30_000);
    await h.runnerExecutor!.reconcile();
    await until(() => assignments().length === 2, 'the re-assignment');
    // back in the queue with the next generation, offered again to the free worker
    expect((await ti()).dispatch_gen).toBe(genBefore + 1);
    const again = assignments()[1]!;
    expect(again.assignment_id).not.toBe(first!.assignment_id);
    expect(again.identity.dispatch_gen).toBe(genBefore + 1);
    expect(again.attempt_token).not.toBe(first!.attempt_token);

    const old = h.agent(first!.attempt_token);
    // its own assignment is gone; the new one is not its attempt
    expect((await old.ackAssignment({ assignmentId: first!.assignment_id })).accepted).toBe(false);
    expect((await old.ackAssignment({ assignmentId: again.assignment_id })).accepted).toBe(false);
    expect((await old.register(register)).shouldTerminate).toBe(true);
    // it never registered, so it is refused before the liveness gate (issue 34: no session bound)
    expect(await codeOf(old.getVariables({}))).toBe(Code.Unauthenticated);
    expect((await ti()).state).toBe('queued');

    const fresh = h.agent(again.attempt_token);
    expect((await fresh.ackAssignment({ assignmentId: again.assignment_id })).accepted).toBe(true);
    expect((await fresh.register(register)).shouldTerminate).toBe(false);
    expect((await fresh.getVariables({})).variables).toEqual({ canary: 'v-canary' });
    expect((await ti()).state).toBe('running');
  });

  it('a row that moved on while unacked is not handed out again', async () => {
    const { h, assignments, ti } = await setup();
    const row = await ti();
    // the row leaves the generation the broker holds (as a reset or another dispatch would)
    await h.store.updateTaskInstance(
      row.id,
      { states: ['queued'], dispatch_gen: row.dispatch_gen },
      { dispatch_gen: row.dispatch_gen + 5 },
      h.clock.now(),
    );
    h.clock.advance(30_000);
    await h.runnerExecutor!.reconcile();
    await flush();
    expect(assignments()).toHaveLength(1);
    expect(h.broker!.waiting).toBe(0);
  });
});
