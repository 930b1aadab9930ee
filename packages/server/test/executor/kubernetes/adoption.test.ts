/**
 * A restarted control plane's Kubernetes executor, against the apiserver double (no kubelet:
 * the pods stay Pending, which is all adoption looks at): it finds the pods of this
 * installation by label, keeps those whose attempt is still live (their claims stay alive) and
 * deletes the rest, so no pod is left that nobody owns. Pods of another installation sharing the
 * namespace are never touched.
 */
import { ADMIN_USER, type KubeDouble } from '@leoflow/kube-double';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AttemptIdentity } from '../../../src/auth/agent-token.js';
import { parseExecutorSection } from '../../../src/config/executor-config.js';
import type { KubernetesExecutorConfig } from '../../../src/config/server-config.js';
import type { AgentExit } from '../../../src/attempts/attempt-lifecycle.js';
import { KubernetesExecutor } from '../../../src/executor/kubernetes/kubernetes-executor.js';
import { LABEL } from '../../../src/executor/kubernetes/labels.js';
import { startKubeTestCluster, type KubeTestCluster } from '../../support/kube-cluster.js';

const NAMESPACE = 'leoflow-adopt';
let cluster: KubeTestCluster;
let double: KubeDouble;
const executors: KubernetesExecutor[] = [];

beforeAll(async () => {
  cluster = await startKubeTestCluster({
    prefix: 'leoflow-kube-adopt-',
    namespaces: { [NAMESPACE]: [] },
  });
  double = cluster.double;
});

afterEach(async () => {
  for (const e of executors.splice(0)) await e.close();
  const admin = double.api.context(ADMIN_USER);
  for (const p of double.store.list(double.api.type('', 'pods')))
    double.api.deleteObject(
      double.api.type('', 'pods'),
      NAMESPACE,
      p.metadata.name ?? '',
      { gracePeriodSeconds: 0 },
      admin,
    );
});

afterAll(async () => {
  await cluster?.stop();
});

/** Through the config file's parser, as an operator would write it. */
function config(instance: string): KubernetesExecutorConfig {
  return parseExecutorSection(
    {
      kubernetes: {
        kubeconfig: cluster.kubeconfig,
        agent_image: 'leoflow-agent:adopt',
        agent_url: 'http://127.0.0.1:1',
        pod_start_timeout: '60s',
        instance,
        termination_grace_period: 0,
        tenants: { default: { namespace: NAMESPACE, service_accounts: ['default'] } },
      },
    },
    null,
  ).kubernetes!;
}

function identity(ti: string): AttemptIdentity {
  return {
    tenant_id: 'default',
    dag_id: 'etl',
    dag_run_id: 'dr-1',
    run_id: 'r1',
    task_id: ti,
    try_number: 1,
    task_instance_id: ti,
    dispatch_gen: 0,
  };
}

function executor(
  instance: string,
  attemptLive: (id: AttemptIdentity) => Promise<boolean>,
): KubernetesExecutor {
  const e = new KubernetesExecutor({
    config: config(instance),
    logger: pino({ level: 'silent' }),
    attemptLive,
    sweepIntervalMs: 100,
  });
  executors.push(e);
  return e;
}

/** The attempts whose pods exist now, by task instance id (label). */
function podAttempts(): string[] {
  return double.store
    .list(double.api.type('', 'pods'))
    .filter((p) => !p.metadata.deletionTimestamp)
    .map((p) => p.metadata.labels?.[LABEL.taskInstance] ?? '?')
    .sort();
}

async function launch(e: KubernetesExecutor, ti: string): Promise<void> {
  await e.start({
    identity: identity(ti),
    credential: { mint: () => Promise.resolve(`token-of-${ti}`) },
    agentUrl: 'http://127.0.0.1:1',
    heartbeatIntervalMs: 1_000,
  });
}

const claim = (ti: string) => ({
  task_instance_id: ti,
  try_number: 1,
  dispatch_gen: 0,
  hostname: null,
  pid: null,
  queued_at: Date.now(),
});

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('a restarted Kubernetes executor re-adopts its pods by label', () => {
  it('keeps the pods of live attempts (their claims stay alive), deletes the pods of attempts that moved on, and never touches another installation’s', async () => {
    const before = executor('prod', () => Promise.resolve(true));
    await before.whenSynced();
    for (const ti of ['ti-live', 'ti-finished', 'ti-superseded']) await launch(before, ti);
    const neighbour = executor('staging', () => Promise.resolve(true));
    await neighbour.whenSynced();
    await launch(neighbour, 'ti-staging');
    // The control plane dies: its watches stop, its pods go on.
    await before.close();
    expect(podAttempts()).toEqual(['ti-finished', 'ti-live', 'ti-staging', 'ti-superseded']);

    const asked: string[] = [];
    const exits: AgentExit[] = [];
    const after = executor('prod', (id) => {
      asked.push(id.task_instance_id);
      return Promise.resolve(id.task_instance_id === 'ti-live');
    });
    after.onAgentExit((x) => exits.push(x));
    await after.whenSynced();
    await until('the dead attempts’ pods to go', () => podAttempts().length === 2);

    expect(podAttempts()).toEqual(['ti-live', 'ti-staging']);
    // Only this installation's pods were asked about (the selector carries the instance label).
    expect(asked.sort()).toEqual(['ti-finished', 'ti-live', 'ti-superseded']);
    // The adopted pod is the live claim's agent starting (Pending): no twin is dispatched.
    expect((await after.probeClaim(claim('ti-live'), Date.now())).state).toBe('starting');
    expect((await after.probeClaim(claim('ti-finished'), Date.now())).state).toBe('gone');
    // Dropping a dead attempt's pod is not an outcome of a live attempt.
    expect(exits.map((x) => x.identity.task_instance_id)).not.toContain('ti-live');
  });

  it('an inconclusive liveness read keeps the pod (the reapers decide its attempt)', async () => {
    const before = executor('prod', () => Promise.resolve(true));
    await before.whenSynced();
    await launch(before, 'ti-unknown');
    await before.close();
    let reads = 0;
    const after = executor('prod', () => {
      reads++;
      return Promise.reject(new Error('database unavailable'));
    });
    await after.whenSynced();
    await until('the liveness read', () => reads > 0);
    await new Promise((r) => setTimeout(r, 300));
    expect(podAttempts()).toEqual(['ti-unknown']);
  });
});
