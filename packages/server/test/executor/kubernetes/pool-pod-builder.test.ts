/**
 * The warm-pool pod: as locked down as an attempt pod (but for the attempt-uid capabilities,
 * unless attempt_uids is off), naming its pool and nothing else.
 */
import { describe, expect, it } from 'vitest';
import { WORKER_POOL_ANNOTATION } from '../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import { IDENTITY_ANNOTATION, LABEL } from '../../../src/executor/kubernetes/labels.js';
import {
  ATTEMPT_UID_CAPABILITIES,
  POOL_LABEL,
  WARM_POOL_EXECUTOR,
  WARM_WORKER_ENV,
  buildPoolPod,
} from '../../../src/executor/kubernetes/pool-pod-builder.js';
import {
  EXCHANGE_TOKEN_FILE_ENV,
  EXCHANGE_TOKEN_VOLUME,
} from '../../../src/executor/kubernetes/projected-token.js';
import { restrictedViolations } from '../../support/pod-security.js';

const input = {
  name: 'leoflow-worker-abc',
  pool: {
    tenant: 'acme',
    namespace: 'acme-tasks',
    serviceAccount: 'etl',
    image: 'leoflow/agent:1',
    minIdle: 1,
    maxSize: 2,
    maxAttemptsPerWorker: 5,
    maxWorkerLifetimeMs: 3_600_000,
    idleTtlMs: 300_000,
  },
  poolKey: 'wp-0123456789abcdef',
  agentUrl: 'https://leoflow-agent.leoflow.svc:8793',
  heartbeatIntervalMs: 15_000,
  instance: 'leoflow',
  runAsUser: 65532,
  terminationGracePeriodSeconds: 30,
  agentCa: null,
};

describe('buildPoolPod', () => {
  it('with attempt_uids off, passes Pod Security Admission restricted', () => {
    const pod = buildPoolPod({ ...input, pool: { ...input.pool, attemptUids: false } });
    expect(restrictedViolations(pod.spec as unknown as Record<string, unknown>)).toEqual([]);
    // beyond restricted, as attempt pods: a read-only root, writes only to its emptyDirs
    expect(pod.spec!.containers[0]!.securityContext?.readOnlyRootFilesystem).toBe(true);
  });

  it('by default runs the worker as root with only the attempt-uid capabilities (Pod Security baseline)', () => {
    const pod = buildPoolPod(input);
    const c = pod.spec!.containers[0]!.securityContext!;
    expect(c).toMatchObject({
      runAsUser: 0,
      runAsNonRoot: false,
      allowPrivilegeEscalation: false,
      privileged: false,
      readOnlyRootFilesystem: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(c.capabilities?.drop).toEqual(['ALL']);
    expect([...(c.capabilities?.add ?? [])].sort()).toEqual([...ATTEMPT_UID_CAPABILITIES].sort());
    // every added capability is one Pod Security baseline allows
    const baseline = [
      'AUDIT_WRITE',
      'CHOWN',
      'DAC_OVERRIDE',
      'FOWNER',
      'FSETID',
      'KILL',
      'MKNOD',
      'NET_BIND_SERVICE',
      'SETFCAP',
      'SETGID',
      'SETPCAP',
      'SETUID',
      'SYS_CHROOT',
    ];
    for (const cap of c.capabilities?.add ?? []) expect(baseline).toContain(cap);
    expect(pod.spec?.hostPID).toBe(false);
    expect(restrictedViolations(pod.spec as unknown as Record<string, unknown>)).not.toEqual([]);
  });

  it("names its pool (annotation and label), runs the pool's identity and image, carries no attempt and no credential", () => {
    const pod = buildPoolPod(input);
    expect(pod.metadata?.annotations).toEqual({ [WORKER_POOL_ANNOTATION]: input.poolKey });
    expect(pod.metadata?.annotations?.[IDENTITY_ANNOTATION]).toBeUndefined();
    expect(pod.metadata?.labels?.[POOL_LABEL]).toBe(input.poolKey);
    expect(pod.metadata?.labels?.[LABEL.executor]).toBe(WARM_POOL_EXECUTOR);
    expect(pod.metadata?.namespace).toBe('acme-tasks');
    expect(pod.spec?.serviceAccountName).toBe('etl');
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
    const c = pod.spec!.containers[0]!;
    expect(c.image).toBe('leoflow/agent:1');
    expect(c.args).toBeUndefined();
    expect(c.command).toBeUndefined();
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
    expect(env[WARM_WORKER_ENV]).toBe('1');
    expect(env.LEOFLOW_AGENT_URL).toBe(input.agentUrl);
    expect(env[EXCHANGE_TOKEN_FILE_ENV]).toBe('/var/run/secrets/leoflow.io/exchange/token');
    // every env value is a setting, none a credential
    expect(Object.keys(env).sort()).toEqual(
      [
        'HOME',
        'LEOFLOW_AGENT_URL',
        'LEOFLOW_EXCHANGE_TOKEN_FILE',
        'LEOFLOW_HEARTBEAT_INTERVAL_MS',
        WARM_WORKER_ENV,
        'LEOFLOW_WORKDIR',
        'TMPDIR',
      ].sort(),
    );
    const volume = pod.spec!.volumes!.find((v) => v.name === EXCHANGE_TOKEN_VOLUME);
    expect(volume?.projected?.sources?.[0]?.serviceAccountToken).toEqual({
      audience: 'leoflow-control-plane',
      expirationSeconds: 600,
      path: 'token',
    });
    expect(c.volumeMounts?.find((m) => m.name === EXCHANGE_TOKEN_VOLUME)?.readOnly).toBe(true);
  });

  it('floors the projected token at the apiserver minimum of ten minutes', () => {
    const pod = buildPoolPod({ ...input, projectedTokenSeconds: 60 });
    const volume = pod.spec!.volumes!.find((v) => v.name === EXCHANGE_TOKEN_VOLUME);
    expect(volume?.projected?.sources?.[0]?.serviceAccountToken?.expirationSeconds).toBe(600);
  });
});
