/**
 * Only the lease holder's warm routing hands out assignments (its broker is in its memory), so
 * a worker's AwaitAssignment on a replica that does not lead would wait for nothing: it is
 * refused Unavailable LF_WARM_WORKER_NOT_LEADER (the code in the metadata, for the worker to act
 * on), and a stream whose replica loses the lease is ended the same way. The pod is not
 * recycled for it: its worker reconnects and reaches the leader. Real broker, manager and stream
 * handler on SQLite; the pod API faked; a ManualClock and faked intervals (no real waiting).
 */
import { ManualClock } from '@leoflow/core';
import { ConnectError, Code, type HandlerContext } from '@connectrpc/connect';
import {
  AGENT_PROTOCOL_VERSION,
  ERROR_CODE_METADATA,
  type AwaitAssignmentRequest,
} from '@leoflow/protocol';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AssignmentBroker } from '../../../src/executor/assignments/assignment-broker.js';
import type { WarmPoolConfig } from '../../../src/config/warm-pool-config.js';
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
afterEach(() => {
  vi.useRealTimers();
});

const POOL: WarmPoolConfig = { ...ACME_POOL, minIdle: 1, maxSize: 2, maxAttemptsPerWorker: 5 };
const KEY = warmPoolKey(POOL);
const RENEW_CHECK_MS = 1_000;

async function setup() {
  const clock = new ManualClock(T0);
  let n = 0;
  const api: WorkerPodApi = {
    create: () => Promise.resolve({ uid: `uid-${++n}` }),
    delete: () => Promise.resolve(),
  };
  const manager = new WarmPoolManager([POOL], {
    api,
    tokens,
    clock,
    store: await stores.fresh().open(),
  });
  const broker = new AssignmentBroker(clock);
  const lease = { held: true };
  const stream = createWorkerStream({
    broker,
    manager,
    tokens,
    clock,
    keepaliveMs: 3_600_000,
    renewCheckMs: RENEW_CHECK_MS,
    leading: () => lease.held,
  });
  await manager.reconcile();
  const [pod] = await manager.members(KEY);
  const open = () => {
    const abort = new AbortController();
    const principal = {
      kind: 'worker',
      token: 'worker-token',
      claims: {
        pool_key: KEY,
        tenant_id: 'acme',
        pod_name: pod!.name,
        pod_uid: pod!.uid,
        iat: T0 / 1000,
        exp: T0 / 1000 + 600,
      },
    };
    const ctx = {
      signal: abort.signal,
      values: {
        get: (key: { id: symbol }) => (key.id === AGENT_PRINCIPAL.id ? principal : undefined),
      },
    } as unknown as HandlerContext;
    const req = {
      freeSlots: 1,
      agentVersion: 't',
      protocolVersion: AGENT_PROTOCOL_VERSION,
    } as AwaitAssignmentRequest;
    const s = {
      /** what the stream ended with, once it did (null: a message instead of an error) */
      ended: undefined as ConnectError | null | undefined,
      abort: () => abort.abort(),
    };
    void stream(req, ctx)
      [Symbol.asyncIterator]()
      .next()
      .then(
        () => (s.ended = null),
        (err: unknown) => (s.ended = ConnectError.from(err)),
      );
    return s;
  };
  return { manager, broker, lease, open, pod: pod! };
}

/** lets the handler's store reads settle (no timer involved) */
async function until(cond: () => boolean, s: { abort(): void }): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setImmediate(r));
  if (!cond()) s.abort();
  expect(cond()).toBe(true);
}

function expectNotLeader(err: ConnectError | null): void {
  expect(err?.code).toBe(Code.Unavailable);
  expect(err?.rawMessage).toContain('LF_WARM_WORKER_NOT_LEADER');
  expect(err?.metadata.get(ERROR_CODE_METADATA)).toBe('LF_WARM_WORKER_NOT_LEADER');
}

describe('a warm worker stream and the scheduling lease', () => {
  it('on a replica that does not lead: refused Unavailable LF_WARM_WORKER_NOT_LEADER at once, never attached, the pod still serving', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const { manager, broker, lease, open, pod } = await setup();
    lease.held = false;
    const s = open();
    await until(() => s.ended !== undefined || broker.workers > 0, s);
    expect(broker.workers).toBe(0);
    expectNotLeader(s.ended ?? null);
    expect(broker.workers).toBe(0);
    expect(await manager.serving(KEY, pod.name, pod.uid)).toBe(true);
    expect(manager.recycled).toEqual([]);
  });

  it('on the leader that loses the lease: the attached stream ends with LF_WARM_WORKER_NOT_LEADER and leaves the broker; the pod is not recycled', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const { manager, broker, lease, open, pod } = await setup();
    const s = open();
    await until(() => broker.workers === 1, s);
    vi.advanceTimersByTime(RENEW_CHECK_MS); // still leading: the stream stays
    expect(broker.workers).toBe(1);
    lease.held = false;
    vi.advanceTimersByTime(RENEW_CHECK_MS);
    await until(() => s.ended !== undefined, s);
    expectNotLeader(s.ended ?? null);
    expect(broker.workers).toBe(0);
    expect(await manager.serving(KEY, pod.name, pod.uid)).toBe(true);
    expect(manager.recycled).toEqual([]);
  });
});
