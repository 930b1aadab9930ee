// RBAC, two-sided: a request the applied roles grant succeeds; one they do not grant gets the
// 403 Status a cluster gives, word for word. Requests are made with service-account tokens the
// double minted, so authentication is the real path too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeDouble, type KubeDouble } from '../src/index.js';
import { REAL_CLUSTER } from './support/cluster.js';
import { call } from './support/http.js';

let double: KubeDouble;
const ns = 'rbac';
const other = 'rbac-other';
let token = '';
const user = `system:serviceaccount:${ns}:worker`;

const admin = (method: string, path: string, body?: unknown) =>
  call(double.url, double.adminToken, method, path, body);
const as = (method: string, path: string, body?: unknown, contentType?: string) =>
  call(double.url, token, method, path, body, contentType);

describe.skipIf(REAL_CLUSTER)('RBAC evaluation', () => {
  beforeAll(async () => {
    double = await startKubeDouble({ tls: false });
    for (const name of [ns, other])
      await admin('POST', '/api/v1/namespaces', { metadata: { name } });
    await admin('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, {
      metadata: { name: 'worker' },
    });
    await admin('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
      metadata: { name: 'worker' },
      rules: [
        {
          apiGroups: [''],
          resources: ['pods'],
          verbs: ['get', 'list', 'watch', 'create', 'delete'],
        },
        { apiGroups: [''], resources: ['pods/status'], verbs: ['patch'] },
        { apiGroups: [''], resources: ['secrets'], verbs: ['get'], resourceNames: ['allowed'] },
        { apiGroups: [''], resources: ['serviceaccounts/token'], verbs: ['create'] },
      ],
    });
    await admin('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      metadata: { name: 'worker' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'worker' },
      subjects: [{ kind: 'ServiceAccount', name: 'worker', namespace: ns }],
    });
    await admin('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name: 'configmap-reader' },
      rules: [{ apiGroups: ['*'], resources: ['configmaps'], verbs: ['*'] }],
    });
    // A ClusterRole bound by a RoleBinding grants only inside the binding's namespace.
    await admin('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      metadata: { name: 'configmaps' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'configmap-reader',
      },
      subjects: [{ kind: 'ServiceAccount', name: 'worker', namespace: ns }],
    });
    for (const name of ['allowed', 'hidden']) {
      await admin('POST', `/api/v1/namespaces/${ns}/secrets`, {
        metadata: { name },
        stringData: { k: 'v' },
      });
    }
    const minted = await admin('POST', `/api/v1/namespaces/${ns}/serviceaccounts/worker/token`, {
      spec: {},
    });
    token = (minted.body as { status: { token: string } }).status.token;
  });
  afterAll(async () => {
    await double?.close();
  });

  it('grants what the Role grants', async () => {
    expect((await as('GET', `/api/v1/namespaces/${ns}/pods`)).status).toBe(200);
    const created = await as('POST', `/api/v1/namespaces/${ns}/pods`, {
      metadata: { name: 'p' },
      spec: {
        serviceAccountName: 'worker',
        automountServiceAccountToken: false,
        containers: [{ name: 'c', image: 'i' }],
      },
    });
    expect(created.status).toBe(201);
    const patched = await as(
      'PATCH',
      `/api/v1/namespaces/${ns}/pods/p/status`,
      { status: { message: 'x' } },
      'application/merge-patch+json',
    );
    expect(patched.status).toBe(200);
    expect((await as('GET', `/api/v1/namespaces/${ns}/secrets/allowed`)).status).toBe(200);
    expect(
      (await as('POST', `/api/v1/namespaces/${ns}/serviceaccounts/worker/token`, { spec: {} }))
        .status,
    ).toBe(201);
    expect((await as('GET', `/api/v1/namespaces/${ns}/configmaps`)).status).toBe(200);
  });

  it('refuses a verb the Role lacks, with the apiserver 403 Status', async () => {
    const reply = await as('GET', `/api/v1/namespaces/${ns}/secrets`);
    expect(reply.status).toBe(403);
    expect(reply.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `secrets is forbidden: User "${user}" cannot list resource "secrets" in API group "" in the namespace "${ns}"`,
      reason: 'Forbidden',
      details: { kind: 'secrets' },
      code: 403,
    });
  });

  it('refuses a resource name outside resourceNames', async () => {
    const reply = await as('GET', `/api/v1/namespaces/${ns}/secrets/hidden`);
    expect(reply.status).toBe(403);
    expect((reply.body as { message: string }).message).toBe(
      `secrets "hidden" is forbidden: User "${user}" cannot get resource "secrets" in API group "" in the namespace "${ns}"`,
    );
  });

  it('keeps a subresource separate from its resource', async () => {
    const reply = await as('PUT', `/api/v1/namespaces/${ns}/pods/p`, {
      metadata: { name: 'p' },
      spec: {},
    });
    expect(reply.status).toBe(403);
    const status = await as('GET', `/api/v1/namespaces/${ns}/pods/p/status`);
    expect(status.status).toBe(403);
    expect((status.body as { message: string }).message).toBe(
      `pods "p" is forbidden: User "${user}" cannot get resource "pods/status" in API group "" in the namespace "${ns}"`,
    );
  });

  it('grants a RoleBinding only in its own namespace', async () => {
    const reply = await as('GET', `/api/v1/namespaces/${other}/configmaps`);
    expect(reply.status).toBe(403);
    expect((reply.body as { message: string }).message).toMatch(/in the namespace "rbac-other"$/);
  });

  it('refuses cluster-scoped requests with the cluster-scope wording', async () => {
    const reply = await as('GET', '/api/v1/nodes');
    expect(reply.status).toBe(403);
    expect((reply.body as { message: string }).message).toBe(
      `nodes is forbidden: User "${user}" cannot list resource "nodes" in API group "" at the cluster scope`,
    );
    const group = await as('GET', `/apis/apps/v1/namespaces/${ns}/deployments`);
    expect((group.body as { message: string; details: unknown }).message).toBe(
      `deployments.apps is forbidden: User "${user}" cannot list resource "deployments" in API group "apps" in the namespace "${ns}"`,
    );
    expect((group.body as { details: unknown }).details).toEqual({
      group: 'apps',
      kind: 'deployments',
    });
  });

  it('answers SelfSubjectAccessReview from the same rules', async () => {
    const ask = async (resourceAttributes: Record<string, string>) => {
      const reply = await as('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        spec: { resourceAttributes },
      });
      expect(reply.status).toBe(201);
      return (reply.body as { status: { allowed: boolean } }).status.allowed;
    };
    expect(await ask({ namespace: ns, verb: 'delete', resource: 'pods' })).toBe(true);
    expect(await ask({ namespace: ns, verb: 'update', resource: 'pods' })).toBe(false);
    expect(
      await ask({ namespace: ns, verb: 'patch', resource: 'pods', subresource: 'status' }),
    ).toBe(true);
    expect(await ask({ namespace: other, verb: 'list', resource: 'pods' })).toBe(false);
  });

  it('treats anonymous requests as system:anonymous: /version is public, the rest is not', async () => {
    expect((await call(double.url, undefined, 'GET', '/version')).status).toBe(200);
    const pods = await call(double.url, undefined, 'GET', `/api/v1/namespaces/${ns}/pods`);
    expect(pods.status).toBe(403);
    expect((pods.body as { message: string }).message).toMatch(
      /User "system:anonymous" cannot list/,
    );
  });
});
