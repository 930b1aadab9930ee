/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-return -- rendered YAML is untyped; the assertions are the checks */
/**
 * deploy/components/exchange-secret-fallback, rendered by the real `kubectl kustomize` and applied
 * with the real `kubectl apply -k` to the apiserver double: with the exchange component alone the
 * control plane's ServiceAccount may only get secrets, so boot under
 * auth.exchange_bootstrap=secret_key_ref is refused naming each missing right; with the fallback
 * component the Role grants secrets create/get/patch/delete, the boot check passes, and the
 * config the Deployments boot with selects the fallback.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { loadCredentialPlaneConfig } from '@leoflow/core';
import { startKubeDouble, type KubeDouble } from '@leoflow/kube-double';
import { parse, parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkExchangeBoot } from '../../packages/server/src/exchange/exchange-boot.js';
import { kubeBootstrapSecretClient } from '../../packages/server/src/exchange/kube-bootstrap-secret.js';
import { kubeExchangeClient } from '../../packages/server/src/exchange/kube-token-review.js';

const ROOT = resolve(fileURLToPath(import.meta.url), '../../..');
const EXCHANGE_ONLY = 'test/deploy/fixtures/exchange';
const WITH_FALLBACK = 'test/deploy/fixtures/exchange-secret-fallback';
const NAMESPACE = 'leoflow-prod';
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- rendered YAML is untyped
type Obj = Record<string, any>;

let dir: string;
let double: KubeDouble;
let admin: string;
const kubectl = async (args: string[], kubeconfig = admin) =>
  (
    await promisify(execFile)(
      '/usr/bin/kubectl',
      ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'cache'), ...args],
      { encoding: 'utf8' },
    )
  ).stdout;
const render = async (path: string) =>
  parseAllDocuments(await kubectl(['kustomize', join(ROOT, path)])).map((d) => d.toJSON() as Obj);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leoflow-skr-deploy-'));
  double = await startKubeDouble();
  admin = double.kubeconfig(dir);
}, 30_000);
afterAll(async () => {
  await double?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('deploy/components/exchange-secret-fallback', () => {
  it('renders the secrets rights in the namespace Role and selects the fallback', async () => {
    const objects = await render(WITH_FALLBACK);
    const role = objects.find((o) => o.kind === 'Role')!;
    const secrets = role.rules.filter((r: Obj) => r.resources.includes('secrets'));
    expect(secrets).toEqual([
      { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'get', 'patch', 'delete'] },
    ]);
    // nothing cluster-scoped beyond the exchange component's TokenReview grant
    const cluster = objects.filter((o) => !o.metadata.namespace);
    expect(cluster.map((o) => o.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding']);
    const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'leoflow-config')!;
    const { executor: _executor, ...file } = parse(cm.data['config.yaml'] as string) as Obj;
    for (const name of ['leoflow-api', 'leoflow-scheduler']) {
      const d = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === name)!;
      const env = Object.fromEntries(
        (d.spec.template.spec.containers[0].env as { name: string; value?: string }[]).map((e) => [
          e.name,
          e.value,
        ]),
      );
      const { config } = loadCredentialPlaneConfig({ file, env });
      expect([name, config.agentTokenTransport, config.exchangeBootstrap]).toEqual([
        name,
        'exchange',
        'secret_key_ref',
      ]);
    }
    // the exchange component alone leaves the default bootstrap
    const plain = (await render(EXCHANGE_ONLY)).find(
      (o) => o.kind === 'Deployment' && o.metadata.name === 'leoflow-api',
    )!;
    expect(JSON.stringify(plain)).not.toContain('LEOFLOW_AUTH_EXCHANGE_BOOTSTRAP');
  });

  it('applied to the double: exchange alone → boot refused naming the missing rights; with the fallback → allowed', async () => {
    await kubectl(['create', 'namespace', NAMESPACE]);
    await kubectl(['apply', '-k', join(ROOT, EXCHANGE_ONLY)]);
    const token = (
      await kubectl([
        '-n',
        NAMESPACE,
        'create',
        'token',
        'leoflow-control-plane',
        '--duration',
        '1h',
      ])
    ).trim();
    const kc = new KubeConfig();
    kc.loadFromFile(double.kubeconfig(dir, { token, namespace: NAMESPACE, file: 'cp.kubeconfig' }));
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
    await kubectl(['apply', '-k', join(ROOT, WITH_FALLBACK)]);
    expect(await secretKube.missingSecretRights([NAMESPACE])).toEqual([]);
    await expect(boot()).resolves.toBeUndefined();
    // and in a namespace the Role is not in, the rights are missing again
    await kubectl(['create', 'namespace', 'elsewhere']);
    expect(await secretKube.missingSecretRights(['elsewhere'])).toHaveLength(4);
  }, 60_000);
});
