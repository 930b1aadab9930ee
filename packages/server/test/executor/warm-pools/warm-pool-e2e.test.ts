/**
 * Warm pools end to end, server side, through the kube-apiserver double: the pool's pod is
 * created in the double (no credential on it), a fake worker — a Connect client on the real
 * agent port — exchanges the pod's projected token once for a worker token, waits for an
 * assignment, acks it with the attempt's own token, gets its worker token renewed on the stream,
 * and the pool recycles the pod (deleted in the double) at max_attempts_per_worker. The hostile
 * sides: a worker token on every other RPC, a second exchange, another tenant's attempt, an
 * unacked assignment's token, a recycled pod's token.
 */
import { Code, createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { CoreV1Api } from '@kubernetes/client-node';
import type { KubeDouble } from '@leoflow/kube-double';
import {
  AgentService,
  AGENT_PROTOCOL_VERSION,
  LeoflowTokenScope,
  ReportedState,
} from '@leoflow/protocol';
import { dagSpecHash, isActive, type Clock } from '@leoflow/core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WarmPoolConfig } from '../../../src/config/warm-pool-config.js';
import { startControlPlane, type ControlPlane } from '../../../src/boot/control-plane.js';
import { EXCHANGE_AUDIENCE } from '../../../src/executor/kubernetes/exchange/audience.js';
import { IDENTITY_ANNOTATION, LABEL } from '../../../src/executor/kubernetes/labels.js';
import { AGENT_TOKEN_ENV } from '../../../src/executor/kubernetes/token-transport.js';
import {
  EXCHANGE_TOKEN_FILE_ENV,
  EXCHANGE_TOKEN_VOLUME,
} from '../../../src/executor/kubernetes/projected-token.js';
import { WARM_WORKER_ENV } from '../../../src/executor/kubernetes/pool-pod-builder.js';
import { WORKER_POOL_ANNOTATION } from '../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import { warmPoolKey } from '../../../src/executor/warm-pools/pool-manager.js';
import { startKubeTestCluster, type KubeTestCluster } from '../../support/kube-cluster.js';
import { exchangePlaneConfig } from '../../support/exchange-plane-config.js';
import { spec, task } from '../../support/spec-builders.js';
import {
  bearer,
  codeOf,
  exchangeProjected,
  openWorkerStream,
  projectedToken,
  refusalOf,
  waitFor,
  type Pod,
} from './worker-client.js';

const NS_A = 'pool-a';
const NS_B = 'pool-b';
const SA = 'runner-sa';
const IMAGE = 'leoflow-agent:warm';
const WORKER_TTL_SECONDS = 30;

/** Real time plus what the test advanced: everything else in the control plane keeps moving. */
class SteppedClock implements Clock {
  #offset = 0;
  now(): number {
    return Date.now() + this.#offset;
  }
  advance(ms: number): void {
    this.#offset += ms;
  }
}

const POOL: WarmPoolConfig = {
  tenant: 'default',
  namespace: NS_A,
  serviceAccount: SA,
  image: IMAGE,
  minIdle: 1,
  maxSize: 2,
  maxAttemptsPerWorker: 1,
  maxWorkerLifetimeMs: 3_600_000,
  idleTtlMs: 300_000,
};
const POOL_KEY = warmPoolKey(POOL);

const clock = new SteppedClock();
const logs: string[] = [];
const workerTokens = new Set<string>();
let cluster: KubeTestCluster;
let double: KubeDouble;
let adminCore: CoreV1Api;
let cp: ControlPlane;
let client: Client<typeof AgentService>;

beforeAll(async () => {
  cluster = await startKubeTestCluster({
    prefix: 'leoflow-warm-e2e-',
    namespaces: { [NS_A]: [SA], [NS_B]: [SA] },
  });
  double = cluster.double;
  adminCore = cluster.adminConfig().makeApiClient(CoreV1Api);
  const cfg = exchangePlaneConfig({
    dir: cluster.dir,
    kubeconfig: cluster.kubeconfig,
    image: IMAGE,
    images: [IMAGE],
    instance: 'warm',
    tenants: { default: NS_A, beta: NS_B },
    serviceAccount: SA,
    podStartTimeoutMs: 120_000,
    terminationGracePeriodSeconds: 0,
    // the test drives reconcile() itself
    warmPools: { pools: [POOL], reconcileIntervalMs: 3_600_000 },
  });
  cfg.credentials.secretLivenessMode = 'enforce';
  cp = await startControlPlane(cfg, {
    clock,
    logger: pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) }),
    warmPools: { workerTokenTtlSeconds: WORKER_TTL_SECONDS, renewCheckMs: 25 },
  });
  await cp.store.ensureTenant('beta', 'beta', clock.now());
  client = createClient(AgentService, createGrpcTransport({ baseUrl: cp.agentUrl }));
}, 60_000);

afterAll(async () => {
  await cp?.close();
  await cluster?.stop();
}, 60_000);

function podsIn(namespace: string, executor: string): Pod[] {
  return (double.store.list(double.api.type('', 'pods')) as Pod[]).filter(
    (p) =>
      p.metadata.namespace === namespace &&
      (p.metadata as { labels?: Record<string, string> }).labels?.[LABEL.executor] === executor,
  );
}

const projected = (pod: Pod) => projectedToken(adminCore, pod, SA);
const exchange = (credential: string) => exchangeProjected(client, credential);
const openStream = (token: string) => openWorkerStream(client, token);

let serial = 0;
async function trigger(tenant: string) {
  const s = spec({
    dag_id: `warm_${tenant}_${++serial}`,
    tasks: [task('work', { command: 'true' })],
  });
  await cp.store.putDagVersion(tenant, s, dagSpecHash(s), clock.now());
  return cp.runs.trigger(tenant, s.dag_id, {});
}

/** Pool pods a test has exchanged already. */
const used = new Set<string>();

/** An idle pool pod not exchanged yet (the pool keeps min_idle of them), exchanged. */
async function bootstrapWorker(): Promise<{ pod: Pod; token: string }> {
  await cp.warmPools!.reconcile();
  const pod = podsIn(NS_A, 'warm-pool').find((p) => !used.has(p.metadata.name));
  expect(pod, 'the pool keeps an idle pod').toBeDefined();
  used.add(pod!.metadata.name);
  const res = await exchange(await projected(pod!));
  expect(res.scope).toBe(LeoflowTokenScope.WORKER);
  workerTokens.add(res.token);
  return { pod: pod!, token: res.token };
}

describe('warm pools, server side, through the double', () => {
  let first: { pod: Pod; token: string };

  it('creates the pool pod with no credential on it; exchanging its projected token once gives a worker token, a second exchange is refused', async () => {
    first = await bootstrapWorker();
    const text = JSON.stringify(first.pod);
    expect(text).not.toContain(AGENT_TOKEN_ENV);
    expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./);
    expect(first.pod.metadata.annotations?.[WORKER_POOL_ANNOTATION]).toBe(POOL_KEY);
    expect(first.pod.metadata.annotations?.[IDENTITY_ANNOTATION]).toBeUndefined();
    const p = first.pod.spec as {
      serviceAccountName: string;
      volumes: { name: string; projected?: { sources: { serviceAccountToken?: unknown }[] } }[];
      containers: {
        image: string;
        env: { name: string; value?: string }[];
        volumeMounts: { name: string; readOnly?: boolean }[];
      }[];
    };
    expect(p.serviceAccountName).toBe(SA);
    expect(p.containers[0]!.image).toBe(IMAGE);
    expect(p.volumes.find((v) => v.name === EXCHANGE_TOKEN_VOLUME)?.projected?.sources[0]).toEqual({
      serviceAccountToken: { audience: EXCHANGE_AUDIENCE, expirationSeconds: 600, path: 'token' },
    });
    expect(
      p.containers[0]!.volumeMounts.find((m) => m.name === EXCHANGE_TOKEN_VOLUME)?.readOnly,
    ).toBe(true);
    const env = Object.fromEntries(p.containers[0]!.env.map((e) => [e.name, e.value]));
    expect(env[WARM_WORKER_ENV]).toBe('1');
    expect(env[EXCHANGE_TOKEN_FILE_ENV]).toBeDefined();
    expect(env.LEOFLOW_AGENT_URL).toBe(cp.agentUrl);
    // the same pod, a fresh projected token: one worker token per pod, ever (the exchange's
    // `replayed` refusal, its fixed text)
    const second = await projected(first.pod);
    expect(await refusalOf(exchange(second))).toEqual({
      code: Code.PermissionDenied,
      message: 'this pod, or the attempt it names, has already exchanged its bootstrap credential',
    });
  });

  it('a worker token opens Register and AwaitAssignment only: every other RPC is PermissionDenied', async () => {
    const auth = bearer(first.token);
    expect(
      await codeOf(
        client.register({ protocolVersion: AGENT_PROTOCOL_VERSION, hostname: 'w' }, auth),
      ),
    ).toBe('ok');
    expect(await codeOf(client.getTaskSpec({}, auth))).toBe(Code.PermissionDenied);
    expect(await codeOf(client.getVariables({}, auth))).toBe(Code.PermissionDenied);
    expect(await codeOf(client.getConnections({}, auth))).toBe(Code.PermissionDenied);
    expect(await codeOf(client.heartbeat({}, auth))).toBe(Code.PermissionDenied);
    expect(await codeOf(client.reportState({ state: ReportedState.SUCCESS }, auth))).toBe(
      Code.PermissionDenied,
    );
    expect(await codeOf(client.ackAssignment({ assignmentId: 'asg_x' }, auth))).toBe(
      Code.PermissionDenied,
    );
  });

  it("an attempt of the pool's tenant lands on the worker with its own token; tenant B's never does; after max_attempts_per_worker the pod is deleted and its worker token refused", async () => {
    const stream = openStream(first.token);
    await waitFor('the worker to attach', () =>
      Promise.resolve(cp.warmPools!.broker.workers === 1 ? true : undefined),
    );
    // Tenant B, same service account and image: a cold pod in B's namespace, nothing on A's stream.
    const runB = await trigger('beta');
    const coldB = await waitFor('tenant B cold pod', () =>
      Promise.resolve(podsIn(NS_B, 'kubernetes')[0]),
    );
    expect(coldB.metadata.namespace).toBe(NS_B);
    expect(stream.events.filter((e) => e.event.case === 'assignment')).toEqual([]);
    expect(cp.warmPools!.broker.waiting + cp.warmPools!.broker.held).toBe(0);
    expect((await cp.store.getTaskInstance(runB.id, 'work'))?.state).not.toBe('running');
    // Below the routing, the warm broker itself: B's attempt labelled with A's pool waits.
    const minted: string[] = [];
    cp.warmPools!.broker.enqueue({
      identity: {
        tenant_id: 'beta',
        dag_id: 'd',
        dag_run_id: 'dr',
        run_id: 'r',
        task_id: 't',
        try_number: 1,
        task_instance_id: 'ti-beta-direct',
        dispatch_gen: 0,
      },
      labels: { [WORKER_POOL_ANNOTATION]: POOL_KEY },
      credential: { mint: () => Promise.resolve(`minted-${minted.push('b')}`) },
      heartbeatIntervalMs: 1_000,
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(minted).toEqual([]);
    expect(cp.warmPools!.broker.stateOf('ti-beta-direct', 1)).toBe('waiting');
    cp.warmPools!.broker.cancel('ti-beta-direct', 1, 'test over');
    expect(stream.events.filter((e) => e.event.case === 'assignment')).toEqual([]);

    const runA = await trigger('default');
    const assignment = await stream.next('assignment');
    expect(assignment.spec?.tenantId).toBe('default');
    expect(assignment.spec?.dagId).toBe(runA.dag_id);
    expect(assignment.attemptToken).not.toBe(first.token);
    expect(podsIn(NS_A, 'kubernetes')).toEqual([]); // no cold pod for it
    const ack = await client.ackAssignment(
      { assignmentId: assignment.assignmentId },
      bearer(assignment.attemptToken),
    );
    expect(ack.accepted).toBe(true);
    expect(
      (await cp.warmPools!.manager.members(POOL_KEY)).find(
        (m) => m.name === first.pod.metadata.name,
      ),
    ).toMatchObject({ busy: true, attempts: 1 });
    // the attempt runs and reports with its own token
    const at = bearer(assignment.attemptToken, 'k'.repeat(32));
    await client.register(
      { protocolVersion: AGENT_PROTOCOL_VERSION, hostname: 'w', sessionKey: 'k'.repeat(32) },
      at,
    );
    // liveness-gated and renewed on Heartbeat like any attempt token
    const beat = await client.heartbeat({ sentAtMs: BigInt(clock.now()) }, at);
    expect(beat.shouldTerminate).toBe(false);
    await client.reportState({ state: ReportedState.SUCCESS, exitCode: 0 }, at);
    await waitFor('the attempt to end', async () => {
      const r = (await cp.store.getTaskInstance(runA.id, 'work'))!;
      return !isActive(r.state) && r.state !== 'scheduled' && r.state !== 'none' ? r : undefined;
    });
    await cp.warmPools!.reconcile();
    expect(
      double.store.get(double.api.type('', 'pods'), NS_A, first.pod.metadata.name),
    ).toBeFalsy();
    expect(cp.warmPools!.manager.recycled.at(-1)).toMatchObject({
      name: first.pod.metadata.name,
      reason: 'attempts',
    });
    stream.close();
    const again = openStream(first.token);
    await waitFor('the refusal', () => Promise.resolve(again.ended() ? true : undefined));
    expect(again.failure()?.code).toBe(Code.Unauthenticated);
    expect(again.failure()?.rawMessage).toContain('LF_WARM_WORKER_NOT_SERVING');
    // Register too: the deleted pod's token, signature and exp still good, opens nothing
    expect(
      await codeOf(
        client.register(
          { protocolVersion: AGENT_PROTOCOL_VERSION, hostname: 'w' },
          bearer(first.token),
        ),
      ),
    ).toBe(Code.Unauthenticated);
  }, 60_000);

  it('an unacked assignment returns to the queue after its lease, its token dies, the worker is recycled and the attempt falls back to a cold pod', async () => {
    const w = await bootstrapWorker();
    const stream = openStream(w.token);
    await waitFor('the worker to attach', () =>
      Promise.resolve(cp.warmPools!.broker.workers === 1 ? true : undefined),
    );
    const run = await trigger('default');
    const assignment = await stream.next('assignment');
    clock.advance(31_000); // past the 30 s ack lease
    await cp.warmPools!.reconcile();
    await waitFor('the stream to end', () => Promise.resolve(stream.ended() ? true : undefined));
    expect(cp.warmPools!.manager.recycled.at(-1)).toMatchObject({
      name: w.pod.metadata.name,
      reason: 'unacked',
    });
    // The reconcile above already took the assignment back (expireUnacked dropped it and put the
    // attempt back in the queue, with no worker to match): neither broker knows the id any
    // more, so the late ack — its token still unexpired — is answered, not refused, and told
    // to stop.
    expect(
      cp.warmPools!.broker.stateOf(assignment.spec!.taskInstanceId, assignment.spec!.tryNumber),
    ).toBe('waiting');
    const late = await client.ackAssignment(
      { assignmentId: assignment.assignmentId },
      bearer(assignment.attemptToken),
    );
    expect({
      accepted: late.accepted,
      shouldTerminate: late.shouldTerminate,
      terminateReason: late.terminateReason,
    }).toEqual({
      accepted: false,
      shouldTerminate: true,
      terminateReason: 'no such assignment for this attempt',
    });
    await waitFor('the requeue fence', async () => {
      const ti = (await cp.store.getTaskInstance(run.id, 'work'))!;
      return ti.dispatch_gen > 0 ? ti : undefined;
    });
    // the first hand-over's token: Register and Heartbeat tell it to stop, secrets refuse it
    const stale = bearer(assignment.attemptToken);
    const reg = await client.register(
      { protocolVersion: AGENT_PROTOCOL_VERSION, hostname: 'w', sessionKey: 'j'.repeat(32) },
      stale,
    );
    expect(reg.shouldTerminate).toBe(true);
    // It never registered (its Register bound nothing), so nothing else answers it: refused
    // before the liveness gate and audited (issue 34)
    const unregistered = {
      code: Code.Unauthenticated,
      message: expect.stringMatching(/^LF_CREDENTIAL_UNBOUND: .*has not registered yet/),
    };
    expect(await refusalOf(client.heartbeat({}, stale))).toEqual(unregistered);
    expect(await refusalOf(client.getVariables({}, stale))).toEqual(unregistered);
    const unbound = await cp.store.listAudit(
      'default',
      { action: 'credential.unbound_use' },
      { limit: 10, offset: 0 },
    );
    expect(
      unbound
        .filter((a) => a.actor === `agent:${assignment.spec!.taskInstanceId}#1`)
        .map((a) => a.payload.rpc)
        .sort(),
    ).toEqual(['getVariables', 'heartbeat']);
    await cp.warmPools!.reconcile();
    const cold = await waitFor('the cold fallback pod', () =>
      Promise.resolve(podsIn(NS_A, 'kubernetes')[0]),
    );
    expect(
      (cold.metadata as { labels?: Record<string, string> }).labels?.[LABEL.dispatchGen],
    ).not.toBe('0');
  }, 60_000);

  it('renews the worker token on the stream; the renewed one opens a new stream while the old one expires', async () => {
    const w = await bootstrapWorker();
    const stream = openStream(w.token);
    await waitFor('the worker to attach', () =>
      Promise.resolve(cp.warmPools!.broker.workers >= 1 ? true : undefined),
    );
    expect(stream.events.some((e) => e.event.case === 'workerToken')).toBe(false);
    clock.advance((WORKER_TTL_SECONDS * 2 * 1000) / 3 + 1_000);
    const renewal = await stream.next('workerToken');
    // pushed before the old token runs out, not after
    const oldExpMs =
      (JSON.parse(Buffer.from(w.token.split('.')[1]!, 'base64url').toString()) as { exp: number })
        .exp * 1000;
    expect(clock.now()).toBeLessThan(oldExpMs);
    workerTokens.add(renewal.token);
    expect(renewal.token).not.toBe(w.token);
    expect(Number(renewal.expiresAtMs)).toBeGreaterThan(clock.now() + 20_000);
    clock.advance((WORKER_TTL_SECONDS / 3) * 1000 + 6_000); // the old one past exp and tolerance
    const old = openStream(w.token);
    await waitFor('the old token refused', () => Promise.resolve(old.ended() ? true : undefined));
    expect(old.failure()?.code).toBe(Code.Unauthenticated);
    // the renewed token opens a stream; it replaces the pod's first one (one stream per pod)
    const renewed = openStream(renewal.token);
    await waitFor('the first stream replaced', () =>
      Promise.resolve(stream.ended() ? true : undefined),
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(renewed.ended()).toBe(false);
    expect(renewed.failure()).toBeNull();
    expect(cp.warmPools!.broker.workers).toBe(1);
    renewed.close();
  }, 60_000);

  it('no worker token reaches the logs', () => {
    expect(workerTokens.size).toBeGreaterThanOrEqual(3);
    const text = logs.join('\n');
    for (const t of workerTokens) expect(text).not.toContain(t);
  });
});
