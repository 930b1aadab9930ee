/**
 * deploy/components/exchange-secret-fallback, rendered by the real `kubectl kustomize` and applied
 * with the real `kubectl apply -k` to the apiserver double: with the exchange component alone the
 * control plane's ServiceAccount may only get secrets, so boot under
 * auth.exchange_bootstrap=secret_key_ref is refused naming each missing right; with the fallback
 * component the Role grants secrets create/get/patch/delete, the boot check passes, and the
 * config the Deployments boot with selects the fallback.
 */
import { loadCredentialPlaneConfig } from '@leoflow/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkExchangeBoot } from '../../packages/server/src/boot/exchange-boot.js';
import { kubeBootstrapSecretClient } from '../../packages/server/src/executor/kubernetes/exchange/kube-bootstrap-secret.js';
import { kubeExchangeClient } from '../../packages/server/src/executor/kubernetes/exchange/kube-token-review.js';
import { API_SERVER_KINDS } from '../../packages/server/test/support/kube-cluster.js';
import {
  arrayAt,
  find,
  literalEnv,
  render,
  shippedConfig,
  startKubectlCluster,
  type KubectlCluster,
} from '../support/manifests.js';

const EXCHANGE_ONLY = 'test/deploy/fixtures/exchange';
const WITH_FALLBACK = 'test/deploy/fixtures/exchange-secret-fallback';
const NAMESPACE = 'leoflow-prod';

describe('deploy/components/exchange-secret-fallback', () => {
  it('renders the secrets rights in the namespace Role and selects the fallback', async () => {
    const objects = render(WITH_FALLBACK);
    const secrets = arrayAt(find(objects, 'Role'), 'rules').filter((r) =>
      arrayAt(r, 'resources').includes('secrets'),
    );
    expect(secrets).toEqual([
      { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'get', 'patch', 'delete'] },
    ]);
    // nothing cluster-scoped beyond the exchange component's TokenReview grant
    const cluster = objects.filter((o) => !o.metadata.namespace);
    expect(cluster.map((o) => o.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding']);
    const { executor: _executor, ...file } = shippedConfig(objects);
    for (const name of ['leoflow-api', 'leoflow-scheduler']) {
      const env = literalEnv(find(objects, 'Deployment', name));
      const { config } = loadCredentialPlaneConfig({ file, env });
      expect([name, config.agentTokenTransport, config.exchangeBootstrap]).toEqual([
        name,
        'exchange',
        'secret_key_ref',
      ]);
    }
    // the exchange component alone leaves the default bootstrap
    const plain = find(render(EXCHANGE_ONLY), 'Deployment', 'leoflow-api');
    expect(JSON.stringify(plain)).not.toContain('LEOFLOW_AUTH_EXCHANGE_BOOTSTRAP');
  });
});

describe.each(API_SERVER_KINDS)(
  'deploy/components/exchange-secret-fallback on the %s apiserver',
  (kind) => {
    let k: KubectlCluster;
    beforeAll(async () => {
      k = await startKubectlCluster('leoflow-skr-deploy-', kind);
    }, 60_000);
    afterAll(async () => {
      await k?.stop();
    });

    it('applied: exchange alone → boot refused naming the missing rights; with the fallback → allowed', async () => {
      await k.kubectl(['create', 'namespace', NAMESPACE]);
      await k.apply(EXCHANGE_ONLY);
      const kc = await k.controlPlaneConfig(NAMESPACE);
      const kube = kubeExchangeClient(kc);
      const secretKube = kubeBootstrapSecretClient(kc);
      const boot = () =>
        checkExchangeBoot({
          kube,
          channelMode: 'tls',
          secretBootstrap: { kube: secretKube, namespaces: [NAMESPACE] },
        });
      expect(await secretKube.missingSecretRights([NAMESPACE])).toEqual([
        `create in ${NAMESPACE}`,
        `patch in ${NAMESPACE}`,
        `delete in ${NAMESPACE}`,
      ]);
      await expect(boot()).rejects.toMatchObject({
        code: 'LF_EXCHANGE_SECRET_RIGHTS_MISSING',
        message: expect.stringContaining('deploy/components/exchange-secret-fallback'),
      });
      await k.apply(WITH_FALLBACK);
      expect(await secretKube.missingSecretRights([NAMESPACE])).toEqual([]);
      await expect(boot()).resolves.toBeUndefined();
      // and in a namespace the Role is not in, the rights are missing again
      await k.kubectl(['create', 'namespace', 'elsewhere']);
      expect(await secretKube.missingSecretRights(['elsewhere'])).toHaveLength(4);
    }, 60_000);
  },
);
