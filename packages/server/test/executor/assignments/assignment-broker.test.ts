/**
 * The assignment broker on a ManualClock: matching by tenant, labels and free slots; the token
 * minted only at hand-over; an ack in time is accepted and one at or past the deadline is not
 * (the attempt goes back to the queue and to the next worker); cancellation is pushed; a worker
 * that goes away returns what it had not acked.
 */
import { ManualClock } from '@leoflow/core';
import { describe, expect, it } from 'vitest';
import {
  AssignmentBroker,
  type AssignmentWorker,
  type WaitingAttempt,
  type WorkerEvent,
} from '../../../src/executor/assignments/assignment-broker.js';
import { T0 } from '../../support/harness.js';

const flush = () => new Promise((r) => setImmediate(r));

function attempt(
  n: number,
  o: { tenant?: string; labels?: Record<string, string>; mints?: number[] } = {},
): WaitingAttempt {
  const identity = {
    tenant_id: o.tenant ?? 'team-a',
    dag_id: 'd',
    dag_run_id: 'r',
    run_id: 'run',
    task_id: `t${n}`,
    try_number: 1,
    task_instance_id: `ti-${n}`,
    dispatch_gen: 1,
  };
  let minted = 0;
  return {
    identity,
    labels: o.labels ?? {},
    heartbeatIntervalMs: 15_000,
    credential: {
      mint: () => {
        minted += 1;
        o.mints?.push(n);
        return Promise.resolve(`token-${n}-${minted}`);
      },
    },
  };
}

function worker(
  id: string,
  o: { tenant?: string; labels?: Record<string, string>; slots?: number } = {},
): AssignmentWorker & { events: WorkerEvent[] } {
  const events: WorkerEvent[] = [];
  return {
    id,
    tenant_id: o.tenant ?? 'team-a',
    labels: o.labels ?? {},
    slots: o.slots ?? 1,
    events,
    send: (e) => events.push(e),
  };
}

const assigned = (w: { events: WorkerEvent[] }) =>
  w.events.flatMap((e) => (e.kind === 'assignment' ? [e] : []));

describe('assignment broker', () => {
  it('hands an attempt only to a worker of its tenant carrying every required label, within its slots', async () => {
    const clock = new ManualClock(T0);
    const b = new AssignmentBroker(clock);
    const mints: number[] = [];
    b.enqueue(attempt(1, { labels: { gpu: 'a100' }, mints }));
    b.enqueue(attempt(2, { mints }));
    b.enqueue(attempt(3, { mints }));
    await flush();
    // waiting, not failing, and no token exists while nobody can take it
    expect([b.waiting, mints]).toEqual([3, []]);

    const otherTenant = worker('w-b', { tenant: 'team-b', slots: 5 });
    b.attach(otherTenant);
    const wrongLabel = worker('w-a1', { labels: { gpu: 'h100' }, slots: 1 });
    b.attach(wrongLabel);
    await flush();
    expect(assigned(otherTenant)).toEqual([]);
    // no gpu=a100: it takes the first attempt it matches (2) and stops at its one slot
    expect(assigned(wrongLabel).map((e) => e.identity.task_instance_id)).toEqual(['ti-2']);

    const gpu = worker('w-a2', { labels: { gpu: 'a100', zone: 'x' }, slots: 2 });
    b.attach(gpu);
    await flush();
    expect(assigned(gpu).map((e) => e.identity.task_instance_id)).toEqual(['ti-1', 'ti-3']);
    expect(mints.sort()).toEqual([1, 2, 3]);
    expect(assigned(gpu)[0]!.attempt_token).toBe('token-1-1');
    expect(assigned(gpu)[0]!.ack_deadline_ms).toBe(T0 + 30_000);
    expect(b.waiting).toBe(0);

    // a released slot takes the next waiting attempt
    b.enqueue(attempt(4));
    await flush();
    expect(assigned(gpu)).toHaveLength(2);
    expect(b.release('ti-3', 1)).toBe(true);
    await flush();
    expect(assigned(gpu).map((e) => e.identity.task_instance_id)).toEqual(['ti-1', 'ti-3', 'ti-4']);
  });

  it('an ack before the deadline is accepted; at the deadline it is refused and the attempt goes to the next worker with a new token', async () => {
    const clock = new ManualClock(T0);
    const b = new AssignmentBroker(clock, { ackTimeoutMs: 10_000 });
    const w1 = worker('w1');
    b.attach(w1);
    b.enqueue(attempt(1));
    b.enqueue(attempt(2));
    const w2 = worker('w2');
    b.attach(w2);
    await flush();
    const [a1] = assigned(w1);
    const [a2] = assigned(w2);
    const claims1 = { ...a1!.identity };

    // live side: one ms before the deadline
    clock.advance(9_999);
    expect(b.ack(a1!.assignment_id, claims1)).toEqual({ accepted: true });
    expect(b.expireUnacked()).toBe(0);
    expect(b.stateOf('ti-1', 1)).toBe('acked');

    // dead side: exactly at the deadline
    clock.advance(1);
    expect(b.ack(a2!.assignment_id, { ...a2!.identity })).toEqual({
      accepted: false,
      reason: 'expired',
    });
    expect(w2.events.at(-1)).toMatchObject({ kind: 'cancellation' });
    // back in the queue, and handed out anew (to the first worker with a free slot: w2 again)
    await flush();
    const again = assigned(w2)[1];
    expect(again!.identity.task_instance_id).toBe('ti-2');
    expect(again!.assignment_id).not.toBe(a2!.assignment_id);
    expect(again!.attempt_token).toBe('token-2-2');
    // the old assignment id stays dead
    expect(b.ack(a2!.assignment_id, { ...a2!.identity }).accepted).toBe(false);
  });

  it('expireUnacked returns an unacked assignment past its deadline to the queue', async () => {
    const clock = new ManualClock(T0);
    const b = new AssignmentBroker(clock, { ackTimeoutMs: 5_000 });
    const w1 = worker('w1');
    b.attach(w1);
    b.enqueue(attempt(1));
    await flush();
    clock.advance(4_999);
    expect(b.expireUnacked()).toBe(0);
    clock.advance(1);
    expect(b.expireUnacked()).toBe(1);
    // the slot it held is free again, so the same worker is offered it anew
    await flush();
    expect(assigned(w1).map((e) => e.identity.task_instance_id)).toEqual(['ti-1', 'ti-1']);
  });

  it("refuses an ack made with another attempt's identity", async () => {
    const b = new AssignmentBroker(new ManualClock(T0));
    const w = worker('w', { slots: 2 });
    b.attach(w);
    b.enqueue(attempt(1));
    b.enqueue(attempt(2));
    await flush();
    const [a1, a2] = assigned(w);
    expect(b.ack(a1!.assignment_id, { ...a2!.identity })).toEqual({
      accepted: false,
      reason: 'not-this-attempt',
    });
    expect(b.ack(a1!.assignment_id, { ...a1!.identity, dispatch_gen: 2 }).accepted).toBe(false);
    expect(b.ack('asg_nope', { ...a1!.identity }).accepted).toBe(false);
    expect(b.ack(a1!.assignment_id, { ...a1!.identity }).accepted).toBe(true);
  });

  it('cancel removes a waiting attempt and pushes a cancellation for a held one', async () => {
    const b = new AssignmentBroker(new ManualClock(T0));
    b.enqueue(attempt(1));
    expect(b.cancel('ti-1', 1, 'termination requested').was).toBe('waiting');
    expect(b.waiting).toBe(0);
    const w = worker('w');
    b.attach(w);
    b.enqueue(attempt(2));
    await flush();
    const [a2] = assigned(w);
    expect(b.cancel('ti-2', 1, 'termination requested').was).toBe('held');
    expect(w.events.at(-1)).toEqual({
      kind: 'cancellation',
      assignment_id: a2!.assignment_id,
      reason: 'termination requested',
    });
    expect(b.cancel('ti-2', 1, 'again').was).toBe('none');
  });

  it('a worker that goes away returns its unacked assignments and forgets its acked ones', async () => {
    const b = new AssignmentBroker(new ManualClock(T0));
    const w = worker('w', { slots: 2 });
    const detach = b.attach(w);
    b.enqueue(attempt(1));
    b.enqueue(attempt(2));
    await flush();
    const [a1] = assigned(w);
    b.ack(a1!.assignment_id, { ...a1!.identity });
    detach();
    expect(b.stateOf('ti-1', 1)).toBeUndefined();
    expect(b.stateOf('ti-2', 1)).toBe('waiting');
    expect(b.workers).toBe(0);
  });

  it('a worker gone while the token was minted puts the attempt back', async () => {
    const b = new AssignmentBroker(new ManualClock(T0));
    const w = worker('w');
    const detach = b.attach(w);
    b.enqueue(attempt(1));
    detach(); // before the mint resolved
    await flush();
    expect(assigned(w)).toEqual([]);
    expect(b.stateOf('ti-1', 1)).toBe('waiting');
  });

  it('releaseEnded frees exactly the held attempts whose row ended, moved to another try or generation, or is gone', async () => {
    const clock = new ManualClock(T0);
    const b = new AssignmentBroker(clock);
    const w = worker('w', { slots: 5 });
    b.attach(w);
    for (const n of [1, 2, 3, 4, 5]) b.enqueue(attempt(n));
    await flush();
    expect(b.heldAttempts()).toHaveLength(5);
    const rows: Record<string, { state: string; try_number: number; dispatch_gen: number }> = {
      'ti-1': { state: 'running', try_number: 1, dispatch_gen: 1 }, // live: kept
      'ti-2': { state: 'success', try_number: 1, dispatch_gen: 1 }, // ended
      'ti-3': { state: 'running', try_number: 2, dispatch_gen: 1 }, // a retry took over
      'ti-4': { state: 'queued', try_number: 1, dispatch_gen: 2 }, // requeued: another generation
      // ti-5: no row at all
    };
    const store = {
      getAttemptFence: (id: string) => Promise.resolve(rows[id] as never),
    };
    expect(await b.releaseEnded(store)).toBe(4);
    expect(b.heldAttempts().map((i) => i.task_instance_id)).toEqual(['ti-1']);
    expect(b.stateOf('ti-1', 1)).toBe('assigned');
    // nothing more to free on a second pass
    expect(await b.releaseEnded(store)).toBe(0);
  });
});
