/**
 * deploy/components/exchange, rendered by the real `kubectl kustomize` and applied with the real
 * `kubectl apply -k` to the apiserver double and to the real kube-apiserver: the default install holds no cluster-scoped object
 * and, as the control plane's own ServiceAccount, the exchange's TokenReview is forbidden (403)
 * and the boot check refuses exchange mode; with the component the one grant (create on
 * tokenreviews, nothing else) is there, bound to that account, and both pass.
 */
import { loadCredentialPlaneConfig } from '@leoflow/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkExchangeBoot } from '../../packages/server/src/boot/exchange-boot.js';
import {
  EXCHANGE_AUDIENCE,
  kubeExchangeClient,
} from '../../packages/server/src/executor/kubernetes/exchange/kube-token-review.js';
import { API_SERVER_KINDS } from '../../packages/server/test/support/kube-cluster.js';
import {
  arrayAt,
  at,
  find,
  literalEnv,
  render,
  shippedConfig,
  startKubectlCluster,
  type KubectlCluster,
} from '../support/manifests.js';

const DEFAULT = 'deploy/overlays/example';
const WITH_EXCHANGE = 'test/deploy/fixtures/exchange';
const NAMESPACE = 'leoflow-prod';

describe('deploy/components/exchange', () => {
  it('renders the one grant, bound to the install’s control-plane account, and sets the transport', async () => {
    const base = render(DEFAULT);
    expect(base.filter((o) => o.kind.startsWith('Cluster'))).toEqual([]);
    const objects = render(WITH_EXCHANGE);
    const cluster = objects.filter((o) => !o.metadata.namespace);
    expect(cluster.map((o) => o.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding']);
    const role = find(cluster, 'ClusterRole');
    expect(arrayAt(role, 'rules')).toEqual([
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    ]);
    const binding = find(cluster, 'ClusterRoleBinding');
    expect(at(binding, 'roleRef')).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: role.metadata.name,
    });
    expect(at(binding, 'subjects')).toEqual([
      { kind: 'ServiceAccount', name: 'leoflow-control-plane', namespace: NAMESPACE },
    ]);
    const { executor: _executor, ...file } = shippedConfig(objects);
    for (const name of ['leoflow-api', 'leoflow-scheduler']) {
      const env = literalEnv(find(objects, 'Deployment', name));
      // the env layer over the shipped file: what the control plane boots with
      const loaded = loadCredentialPlaneConfig({ file, env });
      expect([name, loaded.config.agentTokenTransport]).toEqual([name, 'exchange']);
    }
  });
});

describe.each(API_SERVER_KINDS)('deploy/components/exchange on the %s apiserver', (kind) => {
  let k: KubectlCluster;
  beforeAll(async () => {
    k = await startKubectlCluster('leoflow-exchange-deploy-', kind);
  }, 60_000);
  afterAll(async () => {
    await k?.stop();
  });

  it('applied: default install → TokenReview forbidden (403) and boot refused; with the component → allowed', async () => {
    await k.kubectl(['create', 'namespace', NAMESPACE]);
    await k.apply(DEFAULT);
    const kube = kubeExchangeClient(await k.controlPlaneConfig(NAMESPACE));
    await expect(kube.reviewToken('any', [EXCHANGE_AUDIENCE])).rejects.toMatchObject({ code: 403 });
    await expect(checkExchangeBoot({ kube, channelMode: 'tls' })).rejects.toMatchObject({
      code: 'LF_EXCHANGE_TOKENREVIEW_FORBIDDEN',
    });
    await k.apply(WITH_EXCHANGE);
    await expect(checkExchangeBoot({ kube, channelMode: 'tls' })).resolves.toBeUndefined();
    expect(await kube.reviewToken('any', [EXCHANGE_AUDIENCE])).toMatchObject({
      authenticated: false,
    });
  }, 60_000);
});
