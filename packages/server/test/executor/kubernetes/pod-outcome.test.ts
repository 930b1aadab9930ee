import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { podOutcome } from '../../../src/executor/kubernetes/pod-outcome.js';

const T0 = Date.parse('2026-08-20T12:00:00Z');
const START = 300_000;

function pod(status: V1Pod['status'], limits?: Record<string, string>): V1Pod {
  return {
    metadata: { name: 'p', creationTimestamp: new Date(T0) },
    spec: {
      activeDeadlineSeconds: 390,
      containers: [{ name: 'agent', image: 'registry.example/agent:1', resources: { limits } }],
    },
    status,
  };
}
const agent = (state: object) => ({
  containerStatuses: [
    { name: 'agent', image: 'x', imageID: '', ready: false, restartCount: 0, state },
  ],
});

describe('pod outcomes', () => {
  it('OOMKilled → LF_POD_OOM_KILLED naming the memory limit', () => {
    const o = podOutcome(
      pod(
        { phase: 'Failed', ...agent({ terminated: { exitCode: 137, reason: 'OOMKilled' } }) },
        { memory: '256Mi' },
      ),
      T0,
      START,
    );
    expect(o).toMatchObject({ kind: 'ended', exitCode: 137, cause: { code: 'LF_POD_OOM_KILLED' } });
    expect(o.kind === 'ended' && o.cause?.message).toContain('256Mi');
  });

  it('ErrImagePull / ImagePullBackOff → cannot start, LF_POD_IMAGE_PULL naming the image', () => {
    for (const reason of ['ErrImagePull', 'ImagePullBackOff']) {
      const o = podOutcome(
        pod({
          phase: 'Pending',
          ...agent({ waiting: { reason, message: 'secret registry detail' } }),
        }),
        T0,
        START,
      );
      expect(o).toMatchObject({ kind: 'cannot-start', cause: { code: 'LF_POD_IMAGE_PULL' } });
      const msg = o.kind === 'cannot-start' ? o.cause.message : '';
      expect(msg).toContain('registry.example/agent:1');
      // Kubernetes' free-text detail is not repeated (it can carry registry responses).
      expect(msg).not.toContain('secret registry detail');
    }
  });

  it('Unschedulable is starting until the pod-start timeout, then LF_POD_UNSCHEDULABLE quoting the scheduler', () => {
    const p = pod({
      phase: 'Pending',
      conditions: [
        {
          type: 'PodScheduled',
          status: 'False',
          reason: 'Unschedulable',
          message: '0/3 nodes are available: 3 Insufficient memory.',
        },
      ],
    });
    expect(podOutcome(p, T0 + START - 1, START)).toMatchObject({
      kind: 'starting',
      until: T0 + START,
    });
    const o = podOutcome(p, T0 + START, START);
    expect(o).toMatchObject({ kind: 'cannot-start', cause: { code: 'LF_POD_UNSCHEDULABLE' } });
    expect(o.kind === 'cannot-start' && o.cause.message).toContain('Insufficient memory');
  });

  it('a slow image pull is starting (its claim kept) until the timeout, then LF_POD_START_TIMEOUT', () => {
    const p = pod({ phase: 'Pending', ...agent({ waiting: { reason: 'ContainerCreating' } }) });
    expect(podOutcome(p, T0 + 299_999, START)).toEqual({
      kind: 'starting',
      until: T0 + START,
      unschedulable: null,
    });
    expect(podOutcome(p, T0 + START, START)).toMatchObject({
      kind: 'cannot-start',
      cause: { code: 'LF_POD_START_TIMEOUT' },
    });
  });

  it('DeadlineExceeded → LF_POD_DEADLINE_EXCEEDED; a plain failure keeps its exit code with no cause; Running is running', () => {
    expect(
      podOutcome(pod({ phase: 'Failed', reason: 'DeadlineExceeded' }), T0, START),
    ).toMatchObject({
      kind: 'ended',
      cause: { code: 'LF_POD_DEADLINE_EXCEEDED' },
    });
    expect(
      podOutcome(
        pod({ phase: 'Failed', ...agent({ terminated: { exitCode: 3, reason: 'Error' } }) }),
        T0,
        START,
      ),
    ).toEqual({ kind: 'ended', exitCode: 3, cause: null });
    expect(
      podOutcome(pod({ phase: 'Running', ...agent({ running: {} }) }), T0 + 10 * START, START),
    ).toEqual({
      kind: 'running',
    });
  });
});
