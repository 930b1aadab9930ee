// The kubelet simulator: pods run as real local processes; time-driven behaviour (token refresh,
// grace periods, deadlines, pull back-off) moves with an injected clock and an explicit tick().
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_USER,
  ManualClock,
  startKubeDouble,
  startKubelet,
  VOLUME_ROOT_ENV,
  type KubeDouble,
  type Kubelet,
  type Pod,
} from '../src/index.js';
import { REAL_CLUSTER } from './support/cluster.js';

const clock = new ManualClock(Date.parse('2026-03-01T00:00:00Z'));
let double: KubeDouble;
let kubelet: Kubelet;
let workRoot: string;
let released: () => void = () => undefined;
const ns = 'kubelet';

const podType = () => double.api.type('', 'pods');
const admin = () => double.api.context(ADMIN_USER);
const getPod = (name: string) => double.store.get<Pod>(podType(), ns, name);

function createPod(
  name: string,
  spec: Partial<Pod['spec']> & { containers: Pod['spec']['containers'] },
): Pod {
  return double.api.createObject(
    podType(),
    ns,
    {
      metadata: { name },
      spec: { restartPolicy: 'Never', automountServiceAccountToken: false, ...spec },
    },
    admin(),
  ) as Pod;
}

/** Resolves once the named pod satisfies `predicate` (or is gone, when `gone` is asked for). */
function until(
  name: string,
  predicate: (pod: Pod | undefined) => boolean,
): Promise<Pod | undefined> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const pod = getPod(name);
      if (predicate(pod)) {
        stop();
        clearTimeout(timer);
        resolve(pod);
      }
    };
    const stop = double.store.watchFrom(double.store.currentRevision(), check);
    const timer = setTimeout(() => {
      stop();
      reject(
        new Error(
          `pod ${name} never reached the expected state: ${JSON.stringify(getPod(name)?.status)}`,
        ),
      );
    }, 10_000);
    check();
  });
}

/** Polls for something outside the store (a file a container writes). */
async function fileAppears(path: string): Promise<void> {
  for (let attempt = 0; attempt < 500; attempt += 1) {
    if (existsSync(path)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${path} never appeared`);
}

const phase = (wanted: string) => (pod: Pod | undefined) => pod?.status?.phase === wanted;
const waiting = (reason: string) => (pod: Pod | undefined) =>
  pod?.status?.containerStatuses?.[0]?.state.waiting?.reason === reason;

describe.skipIf(REAL_CLUSTER)('kubelet simulator', () => {
  beforeAll(async () => {
    double = await startKubeDouble({ tls: false, clock });
    workRoot = mkdtempSync(join(tmpdir(), 'kube-double-kubelet-'));
    kubelet = startKubelet({
      double,
      nodeName: 'node-a',
      workRoot,
      clock,
      tickIntervalMs: 3_600_000,
      allocatable: { cpu: '2', memory: '4Gi' },
      imageMap: { shell: { entrypoint: ['sh', '-c'] }, held: { entrypoint: ['sh', '-c'] } },
      pullGate: (_pod, image) =>
        image === 'held' ? new Promise<void>((resolve) => (released = resolve)) : Promise.resolve(),
    });
    double.api.createObject(
      double.api.type('', 'namespaces'),
      undefined,
      { metadata: { name: ns } },
      admin(),
    );
    double.api.createObject(
      double.api.type('', 'secrets'),
      ns,
      { metadata: { name: 'creds' }, stringData: { password: 's3cret' } },
      admin(),
    );
  });
  afterAll(async () => {
    await kubelet?.stop();
    await double?.close();
    rmSync(workRoot, { recursive: true, force: true });
  });

  it('runs a pod to Succeeded with its secretKeyRef env resolved', async () => {
    createPod('ok', {
      containers: [
        {
          name: 'main',
          image: 'shell',
          args: ['printf %s "$PASSWORD" > password.txt'],
          env: [
            { name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'creds', key: 'password' } } },
          ],
        },
      ],
    });
    const pod = await until('ok', phase('Succeeded'));
    expect(pod?.spec.nodeName).toBe('node-a');
    expect(pod?.status?.containerStatuses?.[0]?.state.terminated).toMatchObject({
      exitCode: 0,
      reason: 'Completed',
    });
    const dir = join(workRoot, `${ns}_ok_${pod?.metadata.uid ?? ''}`);
    expect(readFileSync(join(dir, 'work', 'password.txt'), 'utf8')).toBe('s3cret');
  });

  it('reports a non-zero exit as Failed with reason Error and the exit code', async () => {
    createPod('fails', { containers: [{ name: 'main', image: 'shell', args: ['exit 3'] }] });
    const pod = await until('fails', phase('Failed'));
    expect(pod?.status?.containerStatuses?.[0]?.state.terminated).toMatchObject({
      exitCode: 3,
      reason: 'Error',
    });
  });

  it('holds a container whose secret is missing in CreateContainerConfigError, and starts it once the secret exists', async () => {
    createPod('needs-secret', {
      containers: [
        {
          name: 'main',
          image: 'shell',
          args: ['true'],
          env: [{ name: 'X', valueFrom: { secretKeyRef: { name: 'later', key: 'k' } } }],
        },
      ],
    });
    const held = await until('needs-secret', waiting('CreateContainerConfigError'));
    expect(held?.status?.phase).toBe('Pending');
    expect(held?.status?.containerStatuses?.[0]?.state.waiting?.message).toBe(
      'secret "later" not found',
    );
    double.api.createObject(
      double.api.type('', 'secrets'),
      ns,
      { metadata: { name: 'later' }, stringData: { k: 'v' } },
      admin(),
    );
    await kubelet.tick();
    await until('needs-secret', phase('Succeeded'));
  });

  it('reports an image the map lacks as ErrImagePull, then ImagePullBackOff, and stays Pending', async () => {
    createPod('no-image', { containers: [{ name: 'main', image: 'registry.example/absent:1' }] });
    await until('no-image', waiting('ErrImagePull'));
    clock.advance(1000);
    await kubelet.tick();
    const pod = await until('no-image', waiting('ImagePullBackOff'));
    expect(pod?.status?.phase).toBe('Pending');
  });

  it('holds a pod Pending while its image pull is held', async () => {
    createPod('slow-pull', { containers: [{ name: 'main', image: 'held', args: ['true'] }] });
    const pending = await until('slow-pull', waiting('ContainerCreating'));
    expect(pending?.status?.phase).toBe('Pending');
    released();
    await until('slow-pull', phase('Succeeded'));
  });

  it('writes a pod-bound projected token and rewrites it at 80% of its lifetime', async () => {
    createPod('tokened', {
      volumes: [
        {
          name: 'leoflow-token',
          projected: {
            sources: [
              {
                serviceAccountToken: {
                  audience: 'leoflow-control-plane',
                  expirationSeconds: 600,
                  path: 'token',
                },
              },
            ],
          },
        },
      ],
      containers: [
        {
          name: 'main',
          image: 'shell',
          args: [`echo "$${VOLUME_ROOT_ENV}" > root.txt; sleep 30`],
          volumeMounts: [{ name: 'leoflow-token', mountPath: '/var/run/leoflow', readOnly: true }],
        },
      ],
    });
    const pod = await until('tokened', phase('Running'));
    const root = kubelet.volumeRoot(ns, 'tokened') ?? '';
    const file = join(root, 'var/run/leoflow/token');
    const first = readFileSync(file, 'utf8');
    const reviewed = double.tokens.review(first, ['leoflow-control-plane']);
    expect(
      reviewed.authenticated && reviewed.user.extra?.['authentication.kubernetes.io/pod-uid'],
    ).toEqual([pod?.metadata.uid]);
    clock.advance(479_000);
    await kubelet.tick();
    expect(readFileSync(file, 'utf8')).toBe(first);
    clock.advance(1_000);
    await kubelet.tick();
    const second = readFileSync(file, 'utf8');
    expect(second).not.toBe(first);
    expect(double.tokens.review(second, ['leoflow-control-plane']).authenticated).toBe(true);
    const workDir = join(workRoot, `${ns}_tokened_${pod?.metadata.uid ?? ''}`, 'work');
    await fileAppears(join(workDir, 'root.txt'));
    expect(readFileSync(join(workDir, 'root.txt'), 'utf8').trim()).toBe(root);
  });

  it('on deletion sends SIGTERM, and SIGKILL only when the grace period has passed', async () => {
    createPod('stubborn', {
      terminationGracePeriodSeconds: 30,
      containers: [
        {
          name: 'main',
          image: 'shell',
          args: ['trap "" TERM; touch trapped; while true; do sleep 0.05; done'],
        },
      ],
    });
    const running = await until('stubborn', phase('Running'));
    // Running means started, not that the shell has installed its trap yet: wait for it.
    const marker = join(
      workRoot,
      `${ns}_stubborn_${running?.metadata.uid ?? ''}`,
      'work',
      'trapped',
    );
    await fileAppears(marker);
    double.api.deleteObject(podType(), ns, 'stubborn', {}, admin());
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(getPod('stubborn')?.metadata.deletionTimestamp).toBeDefined();
    clock.advance(29_000);
    await kubelet.tick();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(getPod('stubborn')).toBeDefined();
    clock.advance(1_000);
    await kubelet.tick();
    await until('stubborn', (pod) => pod === undefined);
  });

  it('removes a pod whose process exits on SIGTERM without waiting for the grace period', async () => {
    createPod('polite', { containers: [{ name: 'main', image: 'shell', args: ['sleep 300'] }] });
    await until('polite', phase('Running'));
    double.api.deleteObject(podType(), ns, 'polite', {}, admin());
    await until('polite', (pod) => pod === undefined);
  });

  it('fails a pod past activeDeadlineSeconds with reason DeadlineExceeded', async () => {
    createPod('overdue', {
      activeDeadlineSeconds: 5,
      containers: [{ name: 'main', image: 'shell', args: ['sleep 300'] }],
    });
    await until('overdue', phase('Running'));
    clock.advance(4_000);
    await kubelet.tick();
    expect(getPod('overdue')?.status?.phase).toBe('Running');
    clock.advance(1_000);
    await kubelet.tick();
    const pod = await until('overdue', phase('Failed'));
    expect(pod?.status).toMatchObject({ reason: 'DeadlineExceeded' });
  });

  it('kills a container over its memory limit and reports OOMKilled', async () => {
    createPod('hungry', {
      containers: [
        {
          name: 'main',
          image: 'shell',
          args: ['sleep 300'],
          resources: { limits: { memory: '1Ki' } },
        },
      ],
    });
    await until('hungry', phase('Running'));
    await kubelet.tick();
    const pod = await until('hungry', phase('Failed'));
    expect(pod?.status?.containerStatuses?.[0]?.state.terminated).toMatchObject({
      reason: 'OOMKilled',
      exitCode: 137,
    });
  });

  it('leaves a pod no node can hold Pending with PodScheduled=False, reason Unschedulable', async () => {
    createPod('picky', {
      nodeSelector: { disk: 'ssd' },
      containers: [{ name: 'main', image: 'shell' }],
    });
    const pod = await until(
      'picky',
      (p) => p?.status?.conditions?.some((c) => c.type === 'PodScheduled') ?? false,
    );
    expect(pod?.spec.nodeName).toBeUndefined();
    expect(pod?.status?.conditions?.find((c) => c.type === 'PodScheduled')).toMatchObject({
      status: 'False',
      reason: 'Unschedulable',
      message:
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    });
    createPod('greedy', {
      containers: [{ name: 'main', image: 'shell', resources: { requests: { cpu: '3' } } }],
    });
    const greedy = await until(
      'greedy',
      (p) => p?.status?.conditions?.some((c) => c.type === 'PodScheduled') ?? false,
    );
    expect(greedy?.status?.conditions?.find((c) => c.type === 'PodScheduled')?.message).toMatch(
      /^0\/1 nodes are available: 1 Insufficient cpu\./,
    );
  });
});
