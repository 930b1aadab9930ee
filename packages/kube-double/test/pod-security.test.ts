// Pod Security Admission in enforce mode, two-sided: a pod meeting the namespace's level is
// admitted; one violating it gets the admission plugin's 403, naming each failed check.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeDouble, type KubeDouble } from '../src/index.js';
import { REAL_CLUSTER } from './support/cluster.js';
import { call } from './support/http.js';

let double: KubeDouble;
const admin = (method: string, path: string, body?: unknown) =>
  call(double.url, double.adminToken, method, path, body);

const restrictedContainer = {
  name: 'main',
  image: 'agent',
  securityContext: {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    readOnlyRootFilesystem: true,
  },
};
const restrictedPod = (name: string, overrides: Record<string, unknown> = {}) => ({
  metadata: { name },
  spec: {
    automountServiceAccountToken: false,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    containers: [restrictedContainer],
    volumes: [{ name: 'work', emptyDir: {} }],
    ...overrides,
  },
});

describe.skipIf(REAL_CLUSTER)('Pod Security Admission (enforce)', () => {
  beforeAll(async () => {
    double = await startKubeDouble({ tls: false });
    for (const [name, level] of [
      ['psa-restricted', 'restricted'],
      ['psa-baseline', 'baseline'],
      ['psa-none', ''],
    ] as const) {
      const labels: Record<string, string> =
        level === '' ? {} : { 'pod-security.kubernetes.io/enforce': level };
      await admin('POST', '/api/v1/namespaces', { metadata: { name, labels } });
    }
  });
  afterAll(async () => {
    await double?.close();
  });

  it('admits a pod that meets restricted', async () => {
    expect(
      (await admin('POST', '/api/v1/namespaces/psa-restricted/pods', restrictedPod('compliant')))
        .status,
    ).toBe(201);
  });

  it('refuses a pod that misses restricted, naming every failed check', async () => {
    const reply = await admin('POST', '/api/v1/namespaces/psa-restricted/pods', {
      metadata: { name: 'lax' },
      spec: {
        automountServiceAccountToken: false,
        containers: [{ name: 'main', image: 'agent' }],
        volumes: [{ name: 'host', hostPath: { path: '/etc' } }],
      },
    });
    expect(reply.status).toBe(403);
    expect(reply.body).toMatchObject({
      kind: 'Status',
      reason: 'Forbidden',
      details: { name: 'lax', kind: 'pods' },
    });
    expect((reply.body as { message: string }).message).toBe(
      'pods "lax" is forbidden: violates PodSecurity "restricted:latest": hostPath volumes (volume "host"), ' +
        'allowPrivilegeEscalation != false (container "main" must set securityContext.allowPrivilegeEscalation=false), ' +
        'unrestricted capabilities (container "main" must set securityContext.capabilities.drop=["ALL"]), ' +
        'restricted volume types (volume "host" uses restricted volume type "hostPath"), ' +
        'runAsNonRoot != true (pod or container "main" must set securityContext.runAsNonRoot=true), ' +
        'seccompProfile (pod or container "main" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
    );
  });

  it('refuses each single restricted violation on an otherwise compliant pod', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      [
        'root',
        {
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 0,
            seccompProfile: { type: 'RuntimeDefault' },
          },
        },
        /runAsUser=0/,
      ],
      [
        'unconfined',
        { securityContext: { runAsNonRoot: true, seccompProfile: { type: 'Unconfined' } } },
        /seccompProfile/,
      ],
      [
        'caps',
        {
          containers: [
            {
              ...restrictedContainer,
              securityContext: {
                ...restrictedContainer.securityContext,
                capabilities: { drop: ['ALL'], add: ['NET_RAW'] },
              },
            },
          ],
        },
        /unrestricted capabilities .*"NET_RAW"/,
      ],
    ];
    for (const [name, overrides, pattern] of cases) {
      const reply = await admin(
        'POST',
        '/api/v1/namespaces/psa-restricted/pods',
        restrictedPod(name, overrides),
      );
      expect(reply.status, name).toBe(403);
      expect((reply.body as { message: string }).message, name).toMatch(pattern);
    }
  });

  it('holds baseline to its own checks, and an unlabelled namespace to none', async () => {
    const plain = {
      metadata: { name: 'plain' },
      spec: { automountServiceAccountToken: false, containers: [{ name: 'main', image: 'agent' }] },
    };
    expect((await admin('POST', '/api/v1/namespaces/psa-baseline/pods', plain)).status).toBe(201);
    const privileged = {
      metadata: { name: 'privileged' },
      spec: {
        automountServiceAccountToken: false,
        containers: [{ name: 'main', image: 'agent', securityContext: { privileged: true } }],
      },
    };
    const refused = await admin('POST', '/api/v1/namespaces/psa-baseline/pods', privileged);
    expect(refused.status).toBe(403);
    expect((refused.body as { message: string }).message).toBe(
      'pods "privileged" is forbidden: violates PodSecurity "baseline:latest": privileged (container "main" must not set securityContext.privileged=true)',
    );
    expect((await admin('POST', '/api/v1/namespaces/psa-none/pods', privileged)).status).toBe(201);
  });
});
