import { ManualClock } from '@leoflow/core';
import { WARM_WORKER_RECYCLE_MESSAGE } from '@leoflow/protocol';
import { describe, expect, it } from 'vitest';
import { parseExecutorSection } from '../../../src/config/executor-config.js';
import type { WarmPoolConfig } from '../../../src/config/warm-pool-config.js';
import {
  WORKER_POOL_ANNOTATION,
  type ReviewedPod,
} from '../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import {
  PRUNE_INTERVAL_MS,
  RECYCLED_ROW_RETENTION_MS,
  WarmPoolManager,
  warmPoolKey,
  type PoolPodState,
  type WorkerPodApi,
} from '../../../src/executor/warm-pools/pool-manager.js';
import { T0 } from '../../auth/fixtures.js';
import { useMemberStores } from './member-stores.js';
import { ACME_POOL, workerTokenIssuer } from './pool-fixtures.js';

const stores = useMemberStores('sqlite');
const newStore = () => stores.fresh().open();
const tokens = await workerTokenIssuer();

const POOL: WarmPoolConfig = ACME_POOL;

function fakeApi() {
  const pods = new Map<string, { namespace: string; uid: string; poolKey: string }>();
  let n = 0;
  const api: WorkerPodApi = {
    create: ({ namespace, name, poolKey }) => {
      const uid = `uid-${++n}`;
      pods.set(name, { namespace, uid, poolKey });
      return Promise.resolve({ uid });
    },
    delete: (_ns, name) => {
      pods.delete(name);
      return Promise.resolve();
    },
  };
  return { api, pods };
}

function reviewed(
  name: string,
  p: { namespace: string; uid: string; poolKey: string },
  over: Partial<ReviewedPod> = {},
): ReviewedPod {
  return {
    namespace: p.namespace,
    name,
    uid: p.uid,
    serviceAccount: 'etl',
    annotations: { [WORKER_POOL_ANNOTATION]: p.poolKey },
    ...over,
  };
}

describe('WarmPoolManager', () => {
  it('keeps min_idle pods, annotated with the pool key, never above max_size', async () => {
    const clock = new ManualClock(T0);
    const { api, pods } = fakeApi();
    const m = new WarmPoolManager([POOL], { api, tokens, clock, store: await newStore() });
    await m.reconcile();
    expect(pods.size).toBe(2);
    const key = warmPoolKey(POOL);
    const [a, b] = await m.members(key);
    await m.attemptStarted({ poolKey: key, ...a! });
    await m.attemptStarted({ poolKey: key, ...b! });
    await m.reconcile();
    expect(pods.size).toBe(3); // max_size caps it although no pod is idle
  });

  it('issues one worker token per pod it created; a second exchange, a stranger, a recycled pod, another uid or SA → null', async () => {
    const clock = new ManualClock(T0);
    const { api, pods } = fakeApi();
    const m = new WarmPoolManager([POOL], { api, tokens, clock, store: await newStore() });
    await m.reconcile();
    const [[name, p], [name2, p2]] = [...pods.entries()] as [
      [string, { namespace: string; uid: string; poolKey: string }],
      [string, { namespace: string; uid: string; poolKey: string }],
    ];
    const issued = await m.issue(reviewed(name, p));
    expect(issued).not.toBeNull();
    const claims = await tokens.verify(issued!.token, T0);
    expect(claims).toMatchObject({
      tenant_id: 'acme',
      pod_name: name,
      pod_uid: p.uid,
      pool_key: warmPoolKey(POOL),
    });
    expect(await m.issue(reviewed(name, p))).toBeNull(); // once per pod
    expect(await m.issue(reviewed('not-mine', p2))).toBeNull(); // p2's uid, another name
    expect(await m.issue(reviewed(name2, p2, { uid: 'recreated' }))).toBeNull();
    expect(await m.issue(reviewed(name2, p2, { serviceAccount: 'default' }))).toBeNull();
    expect(
      await m.issue(
        reviewed(name2, p2, { annotations: { [WORKER_POOL_ANNOTATION]: 'wp-unknown' } }),
      ),
    ).toBeNull();
    await m.recycle({ poolKey: p2.poolKey, name: name2, uid: p2.uid }, 'survivor');
    expect(await m.issue(reviewed(name2, p2))).toBeNull();
    expect(pods.has(name2)).toBe(false);
    expect(await m.serving(p.poolKey, name, p.uid)).toBe(true);
    expect(await m.serving(p2.poolKey, name2, p2.uid)).toBe(false);
  });

  it('recycles after max_attempts_per_worker, after its lifetime, and idle above the floor after the TTL', async () => {
    const clock = new ManualClock(T0);
    const { api, pods } = fakeApi();
    const m = new WarmPoolManager([{ ...POOL, minIdle: 1 }], {
      api,
      tokens,
      clock,
      store: await newStore(),
    });
    const key = warmPoolKey(POOL);
    await m.reconcile();
    const [w] = await m.members(key);
    await m.attemptStarted({ poolKey: key, ...w! });
    await m.attemptFinished({ poolKey: key, ...w! });
    expect(pods.has(w!.name)).toBe(true);
    await m.attemptStarted({ poolKey: key, ...w! });
    await m.attemptFinished({ poolKey: key, ...w! });
    expect(pods.has(w!.name)).toBe(false); // 2 attempts = the limit
    await m.reconcile();
    const [w2] = await m.members(key);
    clock.advance(3_600_000);
    await m.reconcile();
    expect(pods.has(w2!.name)).toBe(false);
    expect(pods.size).toBe(1); // replaced to keep the floor
  });

  it('reconcile lists the pool: a pod gone or finished is recycled (survivor when its message says so), a pod it did not create is deleted', async () => {
    const clock = new ManualClock(T0);
    const { api, pods } = fakeApi();
    const key = warmPoolKey(POOL);
    // what the apiserver has: every pod of the fake, as running unless the test says otherwise
    const listed = new Map<string, PoolPodState>();
    const withList: WorkerPodApi = {
      ...api,
      list: () =>
        Promise.resolve(
          [...pods.entries()].map(
            ([name, p]) =>
              listed.get(name) ?? { name, uid: p.uid, finished: null, deleting: false },
          ),
        ),
    };
    const m = new WarmPoolManager([{ ...POOL, minIdle: 3, maxSize: 3 }], {
      api: withList,
      tokens,
      clock,
      store: await newStore(),
    });
    await m.reconcile();
    const [a, b, c] = await m.members(key);
    const state = (name: string, over: Partial<PoolPodState> = {}): PoolPodState => ({
      name,
      uid: pods.get(name)!.uid,
      finished: null,
      deleting: false,
      ...over,
    });
    // a: still running; b: its worker recycled itself; c: deleted behind its back. b's message
    // is byte for byte what the agent leaves: WarmWorker ends with terminate(RECYCLE_MESSAGE)
    // (that constant IS WARM_WORKER_RECYCLE_MESSAGE) and writeTerminationLog appends a newline.
    listed.set(
      b!.name,
      state(b!.name, { finished: { terminationMessage: `${WARM_WORKER_RECYCLE_MESSAGE}\n` } }),
    );
    pods.delete(c!.name);
    pods.set('stranger', { namespace: POOL.namespace, uid: 'uid-x', poolKey: key });
    await m.reconcile();
    const reasons = Object.fromEntries(m.recycled.map((r) => [r.name, r.reason]));
    expect(reasons[b!.name]).toBe('survivor');
    expect(reasons[c!.name]).toBe('gone');
    expect(reasons[a!.name]).toBeUndefined();
    expect(await m.serving(key, a!.name, a!.uid)).toBe(true);
    expect(await m.serving(key, b!.name, b!.uid)).toBe(false);
    expect(pods.has(b!.name)).toBe(false);
    expect(pods.has('stranger')).toBe(false);
    expect(await m.members(key)).toHaveLength(3); // the floor refilled
    // a finished pod without the word is 'gone', not 'survivor'
    listed.set(a!.name, state(a!.name, { finished: { terminationMessage: 'exit 0' } }));
    await m.reconcile();
    expect(m.recycled.at(-1)).toMatchObject({ name: a!.name, reason: 'gone' });
  });

  it('the leader prunes a recycled row a day after its recycle; the pod stays refused without it', async () => {
    const clock = new ManualClock(T0);
    const { api } = fakeApi();
    const store = await newStore();
    const m = new WarmPoolManager([{ ...POOL, minIdle: 1 }], { api, tokens, clock, store });
    const key = warmPoolKey(POOL);
    await m.reconcile();
    const [w] = await m.members(key);
    await m.recycle({ poolKey: key, ...w! }, 'survivor');
    clock.advance(RECYCLED_ROW_RETENTION_MS - 1);
    await m.reconcile();
    expect((await store.getWarmPoolMember(w!.uid))?.recycled).toBe('survivor');
    clock.advance(PRUNE_INTERVAL_MS);
    await m.reconcile();
    expect(await store.getWarmPoolMember(w!.uid)).toBeUndefined();
    expect(await m.serving(key, w!.name, w!.uid)).toBe(false);
    expect(
      await m.issue(reviewed(w!.name, { namespace: POOL.namespace, uid: w!.uid, poolKey: key })),
    ).toBeNull();
  });

  it("one tenant never gets another tenant's pool: the key differs by tenant, service account and image", async () => {
    const k = warmPoolKey(POOL);
    expect(warmPoolKey({ ...POOL, tenant: 'globex' })).not.toBe(k);
    expect(warmPoolKey({ ...POOL, serviceAccount: 'other' })).not.toBe(k);
    expect(warmPoolKey({ ...POOL, image: 'leoflow/agent:2' })).not.toBe(k);
    const m = new WarmPoolManager([POOL], {
      api: fakeApi().api,
      tokens,
      clock: new ManualClock(T0),
      store: await newStore(),
    });
    expect(m.poolFor('acme', 'etl', 'leoflow/agent:1')).toBe(k);
    expect(m.poolFor('globex', 'etl', 'leoflow/agent:1')).toBeUndefined();
  });
});

describe('executor.kubernetes.warm_pools', () => {
  const section = (pools: unknown) => ({
    kubernetes: {
      agent_image: 'leoflow/agent:1',
      tenants: { acme: { namespace: 'acme-tasks', service_accounts: ['etl'] } },
      warm_pools: pools,
    },
  });

  it('parses a pool with its defaults, in the tenant namespace', () => {
    const s = parseExecutorSection(
      section([{ tenant: 'acme', min_idle: 2, worker_idle_ttl: '10m' }]),
      null,
    );
    expect(s.kubernetes?.warmPools).toEqual([
      expect.objectContaining({
        tenant: 'acme',
        namespace: 'acme-tasks',
        serviceAccount: 'etl',
        image: 'leoflow/agent:1',
        minIdle: 2,
        idleTtlMs: 600_000,
        maxAttemptsPerWorker: 50,
        attemptUids: true,
      }),
    ]);
    const shared = parseExecutorSection(section([{ tenant: 'acme', attempt_uids: false }]), null);
    expect(shared.kubernetes?.warmPools?.[0]?.attemptUids).toBe(false);
  });

  it.each([
    [[{ tenant: 'nobody' }], 'executor.kubernetes.warm_pools[0].tenant'],
    [
      [{ tenant: 'acme', service_account: 'root' }],
      'executor.kubernetes.warm_pools[0].service_account',
    ],
    [[{ tenant: 'acme', image: 'evil:latest' }], 'executor.kubernetes.warm_pools[0].image'],
    [[{ tenant: 'acme', max_size: 0 }], 'executor.kubernetes.warm_pools[0].max_size'],
    [
      [{ tenant: 'acme', max_attempts_per_worker: 0 }],
      'executor.kubernetes.warm_pools[0].max_attempts_per_worker',
    ],
    [
      [{ tenant: 'acme', max_worker_lifetime: '0s' }],
      'executor.kubernetes.warm_pools[0].max_worker_lifetime',
    ],
    [
      [{ tenant: 'acme', worker_idle_ttl: 'soon' }],
      'executor.kubernetes.warm_pools[0].worker_idle_ttl',
    ],
    [[{ tenant: 'acme', min_idle: 9, max_size: 2 }], 'executor.kubernetes.warm_pools[0].min_idle'],
    [[{ tenant: 'acme', bogus: 1 }], 'executor.kubernetes.warm_pools[0].bogus'],
    [[{ tenant: 'acme', attempt_uids: 'yes' }], 'executor.kubernetes.warm_pools[0].attempt_uids'],
    [[{ tenant: 'acme' }, { tenant: 'acme' }], 'executor.kubernetes.warm_pools[1]'],
    ['nope', 'executor.kubernetes.warm_pools'],
  ])('%j → LF_CONFIG_INVALID naming %s', (pools, key) => {
    let err: unknown;
    try {
      parseExecutorSection(section(pools), null);
    } catch (e) {
      err = e;
    }
    expect((err as { code?: string }).code).toBe('LF_CONFIG_INVALID');
    expect(String((err as Error).message)).toContain(key);
  });
});
