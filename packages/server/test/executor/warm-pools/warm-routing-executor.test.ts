/**
 * Warm routing in front of the Kubernetes executor: which attempts go warm (the pool of their
 * tenant, service account and image, with an idle worker attached) and which get a cold pod.
 */
import { ManualClock, type TaskKubernetes } from '@leoflow/core';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AssignmentBroker } from '../../../src/executor/assignments/assignment-broker.js';
import type { WarmPoolConfig } from '../../../src/config/warm-pool-config.js';
import type { Executor } from '../../../src/executor/executor.js';
import type { AttemptLaunch } from '../../../src/attempts/attempt-launch.js';
import { WORKER_POOL_ANNOTATION } from '../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import { warmPoolKey } from '../../../src/executor/warm-pools/pool-manager.js';
import {
  DEFAULT_BUSY_WORKER_WAIT_MS,
  WarmRoutingExecutor,
} from '../../../src/executor/warm-pools/warm-routing-executor.js';

const POOL: Pick<WarmPoolConfig, 'tenant' | 'serviceAccount' | 'image'> = {
  tenant: 'acme',
  serviceAccount: 'etl',
  image: 'agent:1',
};
const KEY = warmPoolKey(POOL);
const allowlist = {
  images: ['agent:1', 'agent:2'],
  serviceAccounts: ['etl', 'other'],
  maxResources: { cpu: '2', memory: '1Gi' },
  defaultResources: {} as { limits?: Record<string, string> },
};

/** busyWorkerWaitMs 'default' leaves the option out (DEFAULT_BUSY_WORKER_WAIT_MS). */
function setup(busyWorkerWaitMs: number | 'default' = 0, attemptsLive = false) {
  const clock = new ManualClock(1_000_000);
  const broker = new AssignmentBroker(clock);
  const cold: string[] = [];
  const inner: Executor = {
    name: 'kubernetes',
    posture: { tokenTransport: 'exchange' },
    start: (l) => {
      cold.push(l.identity.task_instance_id);
      return Promise.resolve();
    },
    terminate: () => Promise.resolve(),
    onAgentExit: () => undefined,
    running: () => 0,
    close: () => Promise.resolve(),
  };
  const routing = new WarmRoutingExecutor({
    inner,
    broker,
    manager: {
      poolFor: (t, sa, img) =>
        warmPoolKey({ tenant: t, serviceAccount: sa, image: img }) === KEY ? KEY : undefined,
    },
    store: {
      getAttemptFence: () =>
        Promise.resolve(
          attemptsLive
            ? ({ tenant_id: 'acme', try_number: 1, dispatch_gen: 0, state: 'running' } as never)
            : undefined,
        ),
    },
    placement: (tenant) =>
      tenant === 'acme' || tenant === 'beta' ? { namespace: tenant, allowlist } : undefined,
    ...(busyWorkerWaitMs === 'default' ? {} : { busyWorkerWaitMs }),
  });
  const sent: string[] = [];
  const attach = (tenant = 'acme') =>
    broker.attach({
      id: `w-${tenant}`,
      tenant_id: tenant,
      labels: { [WORKER_POOL_ANNOTATION]: KEY },
      slots: 1,
      send: (e) => void sent.push(e.kind),
    });
  return { routing, broker, cold, attach, sent };
}

function launch(tenant: string, id: string, kubernetes?: TaskKubernetes): AttemptLaunch {
  return {
    identity: {
      tenant_id: tenant,
      dag_id: 'd',
      dag_run_id: 'dr',
      run_id: 'r',
      task_id: 't',
      try_number: 1,
      task_instance_id: id,
      dispatch_gen: 0,
    },
    credential: { mint: () => Promise.resolve('token') },
    ...(kubernetes ? { task: { kubernetes } as never } : {}),
    agentUrl: 'http://agent',
    heartbeatIntervalMs: 1_000,
  };
}

describe('WarmRoutingExecutor', () => {
  it("resolves the pool as the pod builder would: the tenant's defaults or its choice", () => {
    const { routing } = setup();
    expect(routing.poolOf(launch('acme', 'a'))).toBe(KEY);
    expect(routing.poolOf(launch('acme', 'b', { image: 'agent:1', service_account: 'etl' }))).toBe(
      KEY,
    );
    // another identity, another image, another tenant with the same choice: no pool
    expect(routing.poolOf(launch('acme', 'c', { service_account: 'other' }))).toBeUndefined();
    expect(routing.poolOf(launch('acme', 'd', { image: 'agent:2' }))).toBeUndefined();
    expect(routing.poolOf(launch('beta', 'e'))).toBeUndefined();
    // a choice the allowlist refuses goes cold, where it is refused as always
    expect(routing.poolOf(launch('acme', 'f', { image: 'evil:1' }))).toBeUndefined();
  });

  it('an attempt with resources goes cold: a pool pod carries none, a cold pod enforces them', () => {
    const { routing } = setup();
    const limited = { resources: { limits: { memory: '256Mi' } } };
    expect(routing.poolOf(launch('acme', 'g', limited))).toBeUndefined();
    expect(routing.poolOf(launch('acme', 'h', { resources: { requests: { cpu: '100m' } } }))).toBe(
      undefined,
    );
    // the tenant's default resources apply to a task that sets none: cold as well
    allowlist.defaultResources = { limits: { cpu: '500m' } };
    try {
      expect(routing.poolOf(launch('acme', 'i'))).toBeUndefined();
    } finally {
      allowlist.defaultResources = {};
    }
    expect(routing.poolOf(launch('acme', 'j'))).toBe(KEY);
  });

  it('goes warm only with an idle worker of the pool attached; else cold', async () => {
    const { routing, broker, cold, attach } = setup();
    await routing.start(launch('acme', 'no-worker'));
    expect(cold).toEqual(['no-worker']);
    attach('beta'); // a worker of another tenant does not count
    await routing.start(launch('acme', 'other-tenant-worker'));
    expect(cold).toEqual(['no-worker', 'other-tenant-worker']);
    attach('acme');
    await routing.start(launch('acme', 'warm'));
    expect(cold).toHaveLength(2);
    expect(broker.stateOf('warm', 1)).toBeDefined();
    expect(
      await routing.probeClaim(
        {
          task_instance_id: 'warm',
          try_number: 1,
          dispatch_gen: 0,
          hostname: null,
          pid: null,
          queued_at: 1,
        },
        2,
      ),
    ).toMatchObject({ state: 'starting' });
    // the one worker is busy now: with no wait for a busy worker, the next attempt is cold
    await routing.start(launch('acme', 'busy'));
    expect(cold).toEqual(['no-worker', 'other-tenant-worker', 'busy']);
  });

  it('terminate cancels a held warm attempt on its worker; the cold executor is not asked', async () => {
    const { routing, broker, attach, sent } = setup();
    attach('acme');
    await routing.start(launch('acme', 'held'));
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual(['assignment']);
    await routing.terminate('held', 1);
    expect(sent).toEqual(['assignment', 'cancellation']);
    expect(broker.stateOf('held', 1)).toBeUndefined();
  });

  it('waits briefly for a busy worker of its pool: taken warm once the worker is free', async () => {
    const { routing, broker, cold, attach } = setup(2_000);
    const detach = attach('acme');
    await routing.start(launch('acme', 'first'));
    await new Promise((r) => setImmediate(r));
    expect(broker.stateOf('first', 1)).toBe('assigned');
    // the downstream, dispatched while the worker still holds the upstream
    await routing.start(launch('acme', 'second'));
    expect(cold).toEqual([]);
    expect(broker.stateOf('second', 1)).toBe('waiting');
    // the upstream ends and the worker is free again (its stream re-opened): it takes the second
    broker.release('first', 1);
    detach();
    attach('acme');
    await new Promise((r) => setImmediate(r));
    expect(broker.stateOf('second', 1)).toBe('assigned');
    await new Promise((r) => setTimeout(r, 2_100));
    expect(cold).toEqual([]);
    await routing.close();
  });

  it('a busy worker that stays busy past the wait: the attempt gets its cold pod', async () => {
    const { routing, broker, cold, attach } = setup(150, true);
    attach('acme');
    await routing.start(launch('acme', 'first'));
    await routing.start(launch('acme', 'second'));
    // a reconcile inside the wait leaves it waiting for the worker
    await routing.reconcile();
    expect(cold).toEqual([]);
    await new Promise((r) => setTimeout(r, 300));
    expect(cold).toEqual(['second']);
    expect(broker.stateOf('second', 1)).toBeUndefined();
    await routing.close();
  });

  describe('the default wait for a busy worker', () => {
    afterEach(() => vi.useRealTimers());

    it('is the 2 s docs/kubernetes.md gives for DEFAULT_BUSY_WORKER_WAIT_MS', () => {
      const doc = readFileSync(
        new URL('../../../../../docs/kubernetes.md', import.meta.url),
        'utf8',
      );
      const m = /up to (\d+(?:\.\d+)?) s\s+\(`DEFAULT_BUSY_WORKER_WAIT_MS`\)/.exec(doc);
      expect(m, 'docs/kubernetes.md names the wait and its value').not.toBeNull();
      expect(Number(m![1]) * 1000).toBe(DEFAULT_BUSY_WORKER_WAIT_MS);
    });

    it('left unset, an attempt waits exactly that long for the busy worker, then goes cold', async () => {
      vi.useFakeTimers();
      const { routing, broker, cold, attach } = setup('default', true);
      attach('acme');
      await routing.start(launch('acme', 'first'));
      await vi.advanceTimersByTimeAsync(0);
      expect(broker.stateOf('first', 1)).toBe('assigned');
      await routing.start(launch('acme', 'second'));
      expect(broker.stateOf('second', 1)).toBe('waiting');
      await vi.advanceTimersByTimeAsync(DEFAULT_BUSY_WORKER_WAIT_MS - 1);
      expect(cold).toEqual([]);
      expect(broker.stateOf('second', 1)).toBe('waiting');
      await vi.advanceTimersByTimeAsync(1);
      expect(cold).toEqual(['second']);
      expect(broker.stateOf('second', 1)).toBeUndefined();
      await routing.close();
    });
  });
});
