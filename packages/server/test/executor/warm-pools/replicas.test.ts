/**
 * Warm-pool members in the store, as several replicas see them: two managers on one database
 * (each its own Store, so its own connection) stand for two control-plane replicas sharing one
 * pod API double and one ManualClock. On SQLite and, when it answers, PostgreSQL.
 */
import { ManualClock } from '@leoflow/core';
import { describe, expect, it } from 'vitest';
import type { WarmPoolConfig } from '../../../src/config/warm-pool-config.js';
import {
  WORKER_POOL_ANNOTATION,
  type ReviewedPod,
} from '../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import type { Store } from '../../../src/store/index.js';
import {
  WarmPoolManager,
  warmPoolKey,
  type PoolPodState,
  type WorkerPodApi,
} from '../../../src/executor/warm-pools/pool-manager.js';
import { T0 } from '../../auth/fixtures.js';
import { DIALECTS, useMemberStores } from './member-stores.js';
import { ACME_POOL, workerTokenIssuer } from './pool-fixtures.js';

const tokens = await workerTokenIssuer();

const POOL: WarmPoolConfig = ACME_POOL;
const KEY = warmPoolKey(POOL);

/** The apiserver as both replicas reach it: pods by name, listed by the pool label. */
function podApiDouble() {
  const pods = new Map<string, { uid: string }>();
  const calls = { create: 0, delete: [] as string[] };
  let n = 0;
  const api: WorkerPodApi = {
    create: ({ name }) => {
      calls.create++;
      const uid = `uid-${++n}`;
      pods.set(name, { uid });
      return Promise.resolve({ uid });
    },
    delete: (_ns, name) => {
      calls.delete.push(name);
      pods.delete(name);
      return Promise.resolve();
    },
    list: () =>
      Promise.resolve(
        [...pods.entries()].map(([name, p]): PoolPodState => ({
          name,
          uid: p.uid,
          finished: null,
          deleting: false,
        })),
      ),
  };
  return { api, pods, calls };
}

function reviewed(m: { name: string; uid: string }): ReviewedPod {
  return {
    namespace: POOL.namespace,
    name: m.name,
    uid: m.uid,
    serviceAccount: POOL.serviceAccount,
    annotations: { [WORKER_POOL_ANNOTATION]: KEY },
  };
}

describe.each(DIALECTS)('warm-pool members shared by replicas (%s)', (dialect) => {
  const stores = useMemberStores(dialect);

  async function twoReplicas(pool: WarmPoolConfig = POOL) {
    const db = stores.fresh();
    const clock = new ManualClock(T0);
    const pods = podApiDouble();
    const manager = (store: Store) =>
      new WarmPoolManager([pool], { api: pods.api, tokens, clock, store });
    const storeA = await db.open();
    const storeB = await db.open();
    return { clock, pods, a: manager(storeA), b: manager(storeB), storeA, storeB, db };
  }

  it('an exchange on the replica that did not create the pod mints once; a second exchange on either is refused; a recycle on one refuses it on the other at once', async () => {
    const { a, b, pods } = await twoReplicas();
    await a.reconcile(); // A leads and creates the pods
    const [p1, p2] = await a.members(KEY);
    expect(pods.pods.size).toBe(2);

    const issued = await b.issue(reviewed(p1!));
    expect(issued).not.toBeNull();
    expect(await tokens.verify(issued!.token, T0)).toMatchObject({
      pool_key: KEY,
      tenant_id: 'acme',
      pod_name: p1!.name,
      pod_uid: p1!.uid,
    });
    expect(await a.issue(reviewed(p1!))).toBeNull();
    expect(await b.issue(reviewed(p1!))).toBeNull();

    // both replicas at once for the other pod: exactly one mints
    const raced = await Promise.all([a.issue(reviewed(p2!)), b.issue(reviewed(p2!))]);
    expect(raced.filter((t) => t !== null)).toHaveLength(1);

    expect(await b.serving(KEY, p1!.name, p1!.uid)).toBe(true);
    expect(await a.serving(KEY, p1!.name, p1!.uid)).toBe(true);
    // B (not leading) recycles it — a worker's unacked assignment, say — and A refuses it
    await b.recycle({ poolKey: KEY, ...p1! }, 'unacked');
    expect(await a.serving(KEY, p1!.name, p1!.uid)).toBe(false);
    expect(await b.serving(KEY, p1!.name, p1!.uid)).toBe(false);
    expect(pods.pods.has(p1!.name)).toBe(false);
    // and the other way round
    await a.recycle({ poolKey: KEY, ...p2! }, 'survivor');
    expect(await b.serving(KEY, p2!.name, p2!.uid)).toBe(false);
    // a uid the store never saw, or a name that is not the pod's, serves nowhere
    expect(await b.serving(KEY, p2!.name, 'uid-unknown')).toBe(false);
  });

  it('the recycle reason is stored before the pod is deleted: the other replica refuses the token while the delete is in flight', async () => {
    const { a, b, pods } = await twoReplicas();
    await a.reconcile();
    const [p1] = await a.members(KEY);
    let seenDuringDelete: boolean | undefined;
    const api = pods.api;
    const del = api.delete.bind(api);
    api.delete = async (ns, name) => {
      seenDuringDelete = await b.serving(KEY, p1!.name, p1!.uid);
      return del(ns, name);
    };
    await a.recycle({ poolKey: KEY, ...p1! }, 'idle');
    expect(seenDuringDelete).toBe(false);
  });

  it('failover: the new leader adopts the old pods (creating nothing), deletes a pool pod with no row, recycles a gone one, and recycles by attempts with the old counts', async () => {
    const { clock, a, b, pods, storeA } = await twoReplicas();
    await a.reconcile();
    const [p1, p2] = await a.members(KEY);
    expect(pods.calls.create).toBe(2);
    // A hands p1 one attempt (of max 2)
    await a.attemptStarted({ poolKey: KEY, ...p1! });
    await a.attemptFinished({ poolKey: KEY, ...p1! });
    // a pool pod the store knows nothing of (a create whose row was never written)
    pods.pods.set('leoflow-worker-stranger', { uid: 'uid-stranger' });
    // A stops (its lease lapses); B leads from here on
    await storeA.close();
    clock.advance(60_000);

    await b.reconcile();
    // adopted: both idle, the floor of 2 is met, nothing created, neither deleted
    expect(pods.calls.create).toBe(2);
    expect(pods.calls.delete).toEqual(['leoflow-worker-stranger']);
    expect(pods.pods.has(p1!.name) && pods.pods.has(p2!.name)).toBe(true);
    expect(b.recycled).toEqual([]);
    expect(await b.members(KEY)).toEqual([
      { name: p1!.name, uid: p1!.uid, attempts: 1, busy: false },
      { name: p2!.name, uid: p2!.uid, attempts: 0, busy: false },
    ]);

    // p2's pod goes behind the pool's back: recycled, and the floor refilled
    pods.pods.delete(p2!.name);
    await b.reconcile();
    expect(b.recycled).toEqual([{ poolKey: KEY, name: p2!.name, reason: 'gone' }]);
    expect(await b.serving(KEY, p2!.name, p2!.uid)).toBe(false);
    expect(pods.calls.create).toBe(3);

    // p1's second attempt, on B, is its last: A's count carried over
    await b.attemptStarted({ poolKey: KEY, ...p1! });
    await b.attemptFinished({ poolKey: KEY, ...p1! });
    expect(b.recycled.at(-1)).toEqual({ poolKey: KEY, name: p1!.name, reason: 'attempts' });
    expect(pods.pods.has(p1!.name)).toBe(false);
  });

  it('failover: busy and the idle clock carry over — a busy pod is not idle-recycled, max_size counts adopted pods', async () => {
    const pool = { ...POOL, minIdle: 1, maxSize: 2 };
    const { clock, a, b, pods, storeA } = await twoReplicas(pool);
    await a.reconcile();
    const [p1] = await a.members(KEY);
    await a.attemptStarted({ poolKey: KEY, ...p1! }); // p1 runs an attempt
    await a.reconcile(); // one idle pod for the floor
    expect(pods.calls.create).toBe(2);
    await storeA.close();
    // past the idle TTL for both: p1 is busy, p2 is the floor
    clock.advance(POOL.idleTtlMs + 1);
    await b.reconcile();
    expect(b.recycled).toEqual([]);
    expect(pods.calls.create).toBe(2);
    expect((await b.members(KEY)).map((m) => [m.name, m.busy])).toEqual([
      [p1!.name, true],
      [expect.any(String), false],
    ]);
  });
});
