/**
 * A warm pool pod is reused: attempt 2 runs on the pod attempt 1 ran on. Attempt 1's token,
 * replayed by attempt 2's code on that pod — still signed, still before its exp — resolves no
 * secret once attempt 1 has ended: GetVariables and GetConnections are refused by the liveness
 * gate (secret_liveness_mode=enforce, which warm pools require), and Register answers
 * should_terminate with nothing prefetched. Attempt 2's own token still gets its secrets.
 * Server side, through the kube-apiserver double; the worker is a Connect client on the real
 * agent port (as in warm-pool-e2e.test.ts).
 */
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  AgentService,
  AGENT_PROTOCOL_VERSION,
  BootstrapCredentialKind,
  LeoflowTokenScope,
  ReportedState,
  type Assignment,
  type AwaitAssignmentResponse,
} from '@leoflow/protocol';
import { dagSpecHash, isActive } from '@leoflow/core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultServerConfig } from '../../src/config/server-config.js';
import type { WarmPoolConfig } from '../../src/config/warm-pool-config.js';
import { startControlPlane, type ControlPlane } from '../../src/control-plane.js';
import { EXCHANGE_AUDIENCE } from '../../src/exchange/audience.js';
import { LABEL } from '../../src/executor/kubernetes/labels.js';
import { warmPoolKey } from '../../src/warm-pools/pool-manager.js';
import { startKubeTestCluster, type KubeTestCluster } from '../support/kube-cluster.js';
import { waitFor as waitUntil } from '../support/observe.js';
import { spec, task } from '../support/spec-builders.js';

const NS = 'pool-reuse';
const SA = 'runner-sa';
const IMAGE = 'leoflow-agent:warm-reuse';
const CANARY = 'canary-reuse-5e81c0d2';
const CONN_PASSWORD = 'connpw-reuse-93b7';
const POOL: WarmPoolConfig = {
  tenant: 'default',
  namespace: NS,
  serviceAccount: SA,
  image: IMAGE,
  minIdle: 1,
  // one pod: every attempt lands on it
  maxSize: 1,
  maxAttemptsPerWorker: 5,
  maxWorkerLifetimeMs: 3_600_000,
  idleTtlMs: 300_000,
};
const POOL_KEY = warmPoolKey(POOL);

let cluster: KubeTestCluster;
let cp: ControlPlane;
let client: Client<typeof AgentService>;

beforeAll(async () => {
  cluster = await startKubeTestCluster({
    prefix: 'leoflow-warm-reuse-',
    namespaces: { [NS]: [SA] },
  });
  const cfg = defaultServerConfig(join(cluster.dir, 'data'));
  cfg.http.port = 0;
  cfg.agent.port = 0;
  cfg.metrics.port = null;
  cfg.execution.heartbeatIntervalMs = 1_000;
  cfg.execution.schedulerTickMs = 50;
  cfg.credentials.agentTokenTransport = 'exchange';
  cfg.credentials.secretLivenessMode = 'enforce';
  cfg.credentials.warmPoolsEnabled = true;
  cfg.credentials.secretScoping = 'enforce';
  cfg.defaultExecutor = 'kubernetes';
  cfg.kubernetes = {
    kubeconfig: cluster.kubeconfig,
    agentImage: IMAGE,
    agentUrl: null,
    podStartTimeoutMs: 120_000,
    instance: 'warm-reuse',
    runAsUser: 65532,
    terminationGracePeriodSeconds: 0,
    agentCaConfigMap: null,
    keepFinishedPods: true,
    tenants: {
      default: {
        namespace: NS,
        images: [IMAGE],
        serviceAccounts: [SA],
        maxResources: { cpu: '1', memory: '1Gi' },
        defaultResources: {},
      },
    },
    warmPools: [POOL],
    // the test drives reconcile() itself
    warmPoolReconcileIntervalMs: 3_600_000,
  };
  cp = await startControlPlane(cfg, { logger: pino({ level: 'silent' }) });
  const admin = {
    authorization: `Bearer ${readFileSync(cp.adminTokenFile, 'utf8').trim()}`,
    'content-type': 'application/json',
  };
  const variable = await fetch(`${cp.httpUrl}/api/v1/variables/reuse_var`, {
    method: 'PUT',
    headers: admin,
    body: JSON.stringify({ value: CANARY, secret: true }),
  });
  expect(variable.status).toBe(200);
  const connection = await fetch(`${cp.httpUrl}/api/v1/connections/reuse_conn`, {
    method: 'PUT',
    headers: admin,
    body: JSON.stringify({ uri: `postgres://app:${CONN_PASSWORD}@db.internal:5432/app` }),
  });
  expect(connection.status).toBe(200);
  client = createClient(AgentService, createGrpcTransport({ baseUrl: cp.agentUrl }));
}, 60_000);

afterAll(async () => {
  await cp?.close();
  await cluster?.stop();
}, 60_000);

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

const waitFor = <T>(what: string, probe: () => Promise<T | undefined>) =>
  waitUntil(what, probe, 20_000, 25);

async function refusalOf(p: Promise<unknown>): Promise<{ code: Code; message: string } | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, message: e.rawMessage };
  }
}

/** The pool's one pod, exchanged for its worker token with a projected token bound to it. */
async function bootstrapWorker(): Promise<{ podName: string; token: string }> {
  await cp.warmPools!.reconcile();
  const pod = (
    cluster.double.store.list(cluster.double.api.type('', 'pods')) as {
      metadata: { name: string; namespace: string; uid: string; labels?: Record<string, string> };
    }[]
  ).find((p) => p.metadata.namespace === NS && p.metadata.labels?.[LABEL.executor] === 'warm-pool');
  expect(pod, 'the pool keeps an idle pod').toBeDefined();
  const core = cluster.adminConfig().makeApiClient(CoreV1Api);
  const projected = await core.createNamespacedServiceAccountToken({
    namespace: NS,
    name: SA,
    body: {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        audiences: [EXCHANGE_AUDIENCE],
        expirationSeconds: 600,
        boundObjectRef: {
          kind: 'Pod',
          apiVersion: 'v1',
          name: pod!.metadata.name,
          uid: pod!.metadata.uid,
        },
      },
    },
  });
  const res = await client.exchangeToken({
    kind: BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN,
    credential: projected.status?.token ?? '',
    protocolVersion: AGENT_PROTOCOL_VERSION,
  });
  expect(res.scope).toBe(LeoflowTokenScope.WORKER);
  return { podName: pod!.metadata.name, token: res.token };
}

/** The worker's AwaitAssignment stream (one free slot), its assignments as they arrive. */
function openStream(token: string) {
  const abort = new AbortController();
  const events: AwaitAssignmentResponse[] = [];
  void (async () => {
    try {
      for await (const m of client.awaitAssignment(
        { freeSlots: 1, protocolVersion: AGENT_PROTOCOL_VERSION, agentVersion: 'test' },
        { ...bearer(token), signal: abort.signal },
      )) {
        events.push(m);
      }
    } catch {
      // closed by the test
    }
  })();
  return {
    close: () => abort.abort(),
    nextAssignment: async (): Promise<Assignment> => {
      const m = await waitFor('an assignment', () =>
        Promise.resolve(events.find((e) => e.event.case === 'assignment')),
      );
      events.splice(events.indexOf(m), 1);
      return m.event.value as Assignment;
    },
  };
}

/** Acks the assignment and registers with its own token, as the worker's attempt code does. */
async function start(a: Assignment): Promise<string> {
  const token = a.attemptToken;
  const ack = await client.ackAssignment({ assignmentId: a.assignmentId }, bearer(token));
  expect(ack.accepted).toBe(true);
  const reg = await client.register(
    { protocolVersion: AGENT_PROTOCOL_VERSION, hostname: 'w', sessionKey: 's'.repeat(32) },
    bearer(token),
  );
  expect(reg.shouldTerminate).toBe(false);
  return token;
}

/** Reports success and frees the worker (the routing's reconcile releases ended attempts). */
async function finish(token: string, runId: string, taskId: string): Promise<void> {
  const res = await client.reportState(
    { state: ReportedState.SUCCESS, exitCode: 0 },
    bearer(token),
  );
  expect(res.shouldTerminate).toBe(false);
  await waitFor(`${taskId} to end`, async () => {
    const r = (await cp.store.getTaskInstance(runId, taskId))!;
    return !isActive(r.state) && r.state !== 'scheduled' && r.state !== 'none' ? r : undefined;
  });
  await cp.warmPools!.reconcile();
}

async function trigger(dagId: string, tasks: ReturnType<typeof task>[]) {
  const s = spec({ dag_id: dagId, tasks });
  await cp.store.putDagVersion('default', s, dagSpecHash(s), Date.now());
  return cp.runs.trigger('default', dagId, {});
}

const secrets = { variables: ['reuse_var'], connections: ['reuse_conn'] };

describe('a reused warm pool pod', () => {
  it("attempt 1's unexpired token, replayed on the pod once attempt 2 runs there, resolves no secret", async () => {
    const worker = await bootstrapWorker();
    const stream = openStream(worker.token);
    await waitFor('the worker to attach', () =>
      Promise.resolve(cp.warmPools!.broker.workers === 1 ? true : undefined),
    );

    // Attempt 0 (the upstream) and attempt 1 on the pod: a chain, so attempt 1 has an XCom.
    const run1 = await trigger('reuse_first', [
      task('up'),
      task('work', { depends_on: ['up'], ...secrets }),
    ]);
    const up = await start(await stream.nextAssignment());
    await client.pushXCom(
      { key: 'return_value', value: new TextEncoder().encode('"from-up"') },
      bearer(up),
    );
    await finish(up, run1.id, 'up');
    const a1 = await stream.nextAssignment();
    expect(a1.spec?.taskId).toBe('work');
    const token1 = await start(a1);
    // live, attempt 1's token resolves its declared secrets (the gate is not simply closed)
    expect((await client.getVariables({}, bearer(token1))).variables).toEqual({
      reuse_var: CANARY,
    });
    expect((await client.getConnections({}, bearer(token1))).connectionUris.reuse_conn).toContain(
      CONN_PASSWORD,
    );
    // ... and its spec and its upstream's XCom
    expect((await client.getTaskSpec({}, bearer(token1))).spec?.taskId).toBe('work');
    const liveXCom = await client.fetchXCom({ upstreamTaskId: 'up' }, bearer(token1));
    expect([liveXCom.found, new TextDecoder().decode(liveXCom.value)]).toEqual([true, '"from-up"']);
    await finish(token1, run1.id, 'work');

    // Attempt 2, on the same pod.
    const run2 = await trigger('reuse_second', [task('next', secrets)]);
    const a2 = await stream.nextAssignment();
    expect(a2.spec?.dagId).toBe('reuse_second');
    const token2 = await start(a2);
    expect(
      (await cp.warmPools!.manager.members(POOL_KEY)).map((m) => [m.name, m.busy, m.attempts]),
    ).toEqual([[worker.podName, true, 3]]);
    expect((await cp.store.getTaskInstance(run2.id, 'next'))?.state, 'attempt 2 is running').toBe(
      'running',
    );

    // Attempt 1's token, as attempt 2's code could replay it: signed, unexpired.
    const exp =
      (JSON.parse(Buffer.from(token1.split('.')[1]!, 'base64url').toString()) as { exp: number })
        .exp * 1000;
    expect(exp).toBeGreaterThan(Date.now() + 60_000);
    const stale = bearer(token1);
    const notLive = { code: Code.PermissionDenied, message: 'task instance is no longer live' };
    expect(await refusalOf(client.getVariables({}, stale))).toEqual(notLive);
    expect(await refusalOf(client.getConnections({}, stale))).toEqual(notLive);
    // Seed 001 D2: only the secret RPCs consult liveness. Attempt 1's own spec and the XCom
    // of its upstream stay readable with its token until its exp, as for any ended attempt
    // (pinned here so a change to that decision is a visible one; docs/kubernetes.md says so).
    expect((await client.getTaskSpec({}, stale)).spec?.taskId).toBe('work');
    expect((await client.fetchXCom({ upstreamTaskId: 'up' }, stale)).found).toBe(true);
    // Register's prefetch (the third path to secrets): should_terminate, nothing prefetched
    const reg = await client.register(
      {
        protocolVersion: AGENT_PROTOCOL_VERSION,
        hostname: 'w',
        sessionKey: 'r'.repeat(32),
        prefetch: true,
        wantSpec: true,
      },
      stale,
    );
    expect(reg.shouldTerminate).toBe(true);
    expect(reg.prefetch).toBeUndefined();
    // each refusal is the liveness gate's, audited against attempt 1
    const denied = await cp.store.listAudit(
      'default',
      { action: 'secret.liveness_denied' },
      { limit: 10, offset: 0 },
    );
    expect(
      denied
        .filter((a) => a.actor === `agent:${a1.spec!.taskInstanceId}#1`)
        .map((a) => a.payload.kind)
        .sort(),
    ).toEqual(['connections', 'variables']);

    // Attempt 2's own token still resolves its secrets.
    expect((await client.getVariables({}, bearer(token2))).variables).toEqual({
      reuse_var: CANARY,
    });
    stream.close();
  }, 60_000);
});
