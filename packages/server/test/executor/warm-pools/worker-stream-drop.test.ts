/**
 * A warm worker's AwaitAssignment stream drops while its attempt runs (a broken connection, a
 * replica's proxy). The attempt has its own token and heartbeats, so the drop alone must not
 * requeue it, kill it (recycle its pod) or start its pod's idle clock: docs/kubernetes.md, "The
 * worker's stream" — an ack marks the worker busy and the attempt's end marks it idle (or recycles
 * it at max_attempts_per_worker). While the attempt runs, the pod is handed nothing else. The real
 * broker, pool manager and stream handler; the pod API faked; a ManualClock.
 */
import { ManualClock } from '@leoflow/core';
import {
  AGENT_PROTOCOL_VERSION,
  type AwaitAssignmentRequest,
  type AwaitAssignmentResponse,
} from '@leoflow/protocol';
import type { HandlerContext } from '@connectrpc/connect';
import { describe, expect, it, vi } from 'vitest';
import { AssignmentBroker } from '../../../src/executor/assignments/assignment-broker.js';
import type { WarmPoolConfig } from '../../../src/config/warm-pool-config.js';
import { WORKER_POOL_ANNOTATION } from '../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import { AGENT_PRINCIPAL } from '../../../src/rpc/agent-auth.js';
import {
  WarmPoolManager,
  warmPoolKey,
  type WorkerPodApi,
} from '../../../src/executor/warm-pools/pool-manager.js';
import { createWorkerStream } from '../../../src/rpc/worker-stream.js';
import { T0 } from '../../auth/fixtures.js';
import { useMemberStores } from './member-stores.js';
import { ACME_POOL, workerTokenIssuer } from './pool-fixtures.js';

const stores = useMemberStores('sqlite');
const tokens = await workerTokenIssuer();

const POOL: WarmPoolConfig = {
  ...ACME_POOL,
  minIdle: 1,
  // the attempt that runs is the pod's last: marking it ended would delete the pod at once
  maxAttemptsPerWorker: 1,
};
const KEY = warmPoolKey(POOL);

async function setup(pool: WarmPoolConfig = POOL) {
  const clock = new ManualClock(T0);
  const pods = new Set<string>();
  let n = 0;
  const api: WorkerPodApi = {
    create: ({ name }) => {
      pods.add(name);
      return Promise.resolve({ uid: `uid-${++n}` });
    },
    delete: (_ns, name) => {
      pods.delete(name);
      return Promise.resolve();
    },
  };
  const store = await stores.fresh().open();
  const manager = new WarmPoolManager([pool], { api, tokens, clock, store });
  const broker = new AssignmentBroker(clock);
  const stream = createWorkerStream({ broker, manager, tokens, clock, keepaliveMs: 3_600_000 });

  /** Opens the pod's stream as its worker would (the handler runs up to its first message). */
  function open(pod: { name: string; uid: string }, freeSlots: number) {
    const abort = new AbortController();
    const values = new Map<unknown, unknown>([
      [
        AGENT_PRINCIPAL.id,
        {
          kind: 'worker',
          token: 'worker-token',
          claims: {
            pool_key: KEY,
            tenant_id: 'acme',
            pod_name: pod.name,
            pod_uid: pod.uid,
            iat: T0 / 1000,
            exp: T0 / 1000 + 600,
          },
        },
      ],
    ]);
    const ctx = {
      signal: abort.signal,
      values: { get: (key: { id: symbol }) => values.get(key.id) },
    } as unknown as HandlerContext;
    const req = {
      freeSlots,
      agentVersion: 't',
      protocolVersion: AGENT_PROTOCOL_VERSION,
    } as AwaitAssignmentRequest;
    const it = stream(req, ctx)[Symbol.asyncIterator]();
    const first: Promise<IteratorResult<AwaitAssignmentResponse>> = it.next();
    return {
      first,
      /** the connection breaks: the handler's stream ends and it leaves the broker */
      async drop() {
        abort.abort();
        await first.catch(() => undefined);
        await it.return?.(undefined);
      },
    };
  }

  const enqueue = (id: string) =>
    broker.enqueue({
      identity: {
        tenant_id: 'acme',
        dag_id: 'd',
        dag_run_id: 'dr',
        run_id: 'r',
        task_id: 't',
        try_number: 1,
        task_instance_id: id,
        dispatch_gen: 1,
      },
      labels: { [WORKER_POOL_ANNOTATION]: KEY },
      credential: { mint: () => Promise.resolve(`token-${id}`) },
      heartbeatIntervalMs: 1_000,
    });
  const identity = (id: string) => ({
    tenant_id: 'acme',
    dag_id: 'd',
    dag_run_id: 'dr',
    run_id: 'r',
    task_id: 't',
    try_number: 1,
    task_instance_id: id,
    dispatch_gen: 1,
  });
  /** the worker's first message is this attempt's assignment; it acks it with its identity */
  async function takeAndAck(s: ReturnType<typeof open>, id: string) {
    const msg = (await s.first).value as AwaitAssignmentResponse;
    expect(msg.event.case).toBe('assignment');
    const { assignmentId } = msg.event.value as { assignmentId: string };
    expect(broker.ack(assignmentId, identity(id))).toEqual({ accepted: true });
  }
  /** the stream's handler has read the store and waits in the broker with a free slot */
  const attachedFree = () =>
    vi.waitFor(
      () => expect(broker.hasFreeWorkerFor('acme', { [WORKER_POOL_ANNOTATION]: KEY })).toBe(true),
      { interval: 1 },
    );
  return { clock, pods, manager, broker, open, enqueue, takeAndAck, attachedFree };
}

describe('a warm worker whose stream drops while its attempt runs', () => {
  it('keeps its attempt and stays busy: no requeue, no recycle, no second assignment, no idle clock', async () => {
    const { clock, pods, manager, broker, open, enqueue } = await setup();
    await manager.reconcile();
    const [pod] = await manager.members(KEY);
    expect(pods.has(pod!.name)).toBe(true);

    const s1 = open(pod!, 1);
    enqueue('first');
    const msg = (await s1.first).value as AwaitAssignmentResponse;
    expect(msg.event.case).toBe('assignment');
    const assignment = msg.event.value as { assignmentId: string };
    const ack = broker.ack(assignment.assignmentId, {
      tenant_id: 'acme',
      dag_id: 'd',
      dag_run_id: 'dr',
      run_id: 'r',
      task_id: 't',
      try_number: 1,
      task_instance_id: 'first',
      dispatch_gen: 1,
    });
    expect(ack).toEqual({ accepted: true });
    expect((await manager.members(KEY)).find((m) => m.name === pod!.name)?.busy).toBe(true);

    await s1.drop();
    // not requeued, not recycled (its pod is not deleted under the attempt), still busy
    expect(broker.waiting).toBe(0);
    expect(manager.recycled).toEqual([]);
    expect(pods.has(pod!.name)).toBe(true);
    expect((await manager.members(KEY)).find((m) => m.name === pod!.name)?.busy).toBe(true);

    // the worker reconnects mid-attempt (no free slot): the next attempt is not given to it
    const s2 = open(pod!, 0);
    enqueue('second');
    expect(broker.stateOf('second', 1)).toBe('waiting');

    // past the idle TTL and a reconcile: the busy pod is neither idle-recycled nor deleted
    clock.advance(POOL.idleTtlMs + 1);
    await manager.reconcile();
    expect(manager.recycled.map((r) => r.name)).not.toContain(pod!.name);
    expect(pods.has(pod!.name)).toBe(true);
    expect((await manager.members(KEY)).find((m) => m.name === pod!.name)?.busy).toBe(true);

    // the attempt ends: the worker opens its stream with a free slot again; that is the end,
    // and at max_attempts_per_worker the pod is recycled then (not at the drop)
    await s2.drop();
    const s3 = open(pod!, 1);
    await expect(s3.first).rejects.toThrow(/LF_WARM_WORKER_NOT_SERVING/);
    expect(manager.recycled).toContainEqual({ poolKey: KEY, name: pod!.name, reason: 'attempts' });
    expect(pods.has(pod!.name)).toBe(false);
    // a recycled pod is handed nothing: the next attempt still waits for a serving worker
    expect(broker.stateOf('second', 1)).toBe('waiting');
  });

  it('its idle clock starts when the worker is free again, not at the drop; it is then handed the next attempt', async () => {
    const { clock, pods, manager, broker, open, enqueue, takeAndAck, attachedFree } = await setup({
      ...POOL,
      maxAttemptsPerWorker: 5,
    });
    await manager.reconcile();
    const [pod] = await manager.members(KEY);
    const s1 = open(pod!, 1);
    enqueue('first');
    await takeAndAck(s1, 'first');
    await s1.drop();
    expect(broker.waiting).toBe(0);
    // the attempt runs for longer than the idle TTL after the drop
    clock.advance(POOL.idleTtlMs + 1);
    await manager.reconcile();
    expect((await manager.members(KEY)).find((m) => m.name === pod!.name)?.busy).toBe(true);
    // free again: idle from now (not recycled by the reconcile), and handed the next attempt
    const s2 = open(pod!, 1);
    await attachedFree();
    expect((await manager.members(KEY)).find((m) => m.name === pod!.name)?.busy).toBe(false);
    await manager.reconcile();
    expect(manager.recycled).toEqual([]);
    expect(pods.has(pod!.name)).toBe(true);
    enqueue('second');
    await takeAndAck(s2, 'second');
    await s2.drop();
  });
});
