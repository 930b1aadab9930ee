/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-return -- rendered YAML is untyped; the assertions are the checks */
/**
 * deploy/components/exchange, rendered by the real `kubectl kustomize` and applied with the real
 * `kubectl apply -k` to the apiserver double: the default install holds no cluster-scoped object
 * and, as the control plane's own ServiceAccount, the exchange's TokenReview is forbidden (403)
 * and the boot check refuses exchange mode; with the component the one grant (create on
 * tokenreviews, nothing else) is there, bound to that account, and both pass.
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
import {
  EXCHANGE_AUDIENCE,
  kubeExchangeClient,
} from '../../packages/server/src/exchange/kube-token-review.js';

const ROOT = resolve(fileURLToPath(import.meta.url), '../../..');
const DEFAULT = 'deploy/overlays/example';
const WITH_EXCHANGE = 'test/deploy/fixtures/exchange';
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
  dir = mkdtempSync(join(tmpdir(), 'leoflow-exchange-deploy-'));
  double = await startKubeDouble();
  admin = double.kubeconfig(dir);
}, 30_000);
afterAll(async () => {
  await double?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('deploy/components/exchange', () => {
  it('renders the one grant, bound to the install’s control-plane account, and sets the transport', async () => {
    const base = await render(DEFAULT);
    expect(base.filter((o) => o.kind.startsWith('Cluster'))).toEqual([]);
    const objects = await render(WITH_EXCHANGE);
    const cluster = objects.filter((o) => !o.metadata.namespace);
    expect(cluster.map((o) => o.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding']);
    const role = cluster.find((o) => o.kind === 'ClusterRole')!;
    expect(role.rules).toEqual([
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    ]);
    const binding = cluster.find((o) => o.kind === 'ClusterRoleBinding')!;
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: role.metadata.name,
    });
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'leoflow-control-plane', namespace: NAMESPACE },
    ]);
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
      // the env layer over the shipped file: what the control plane boots with
      const loaded = loadCredentialPlaneConfig({ file, env });
      expect([name, loaded.config.agentTokenTransport]).toEqual([name, 'exchange']);
    }
  });

  it('applied to the double: default install → TokenReview forbidden (403) and boot refused; with the component → allowed', async () => {
    await kubectl(['create', 'namespace', NAMESPACE]);
    await kubectl(['apply', '-k', join(ROOT, DEFAULT)]);
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
    await expect(kube.reviewToken('any', [EXCHANGE_AUDIENCE])).rejects.toMatchObject({ code: 403 });
    await expect(checkExchangeBoot({ kube, channelMode: 'tls' })).rejects.toMatchObject({
      code: 'LF_EXCHANGE_TOKENREVIEW_FORBIDDEN',
    });
    await kubectl(['apply', '-k', join(ROOT, WITH_EXCHANGE)]);
    await expect(checkExchangeBoot({ kube, channelMode: 'tls' })).resolves.toBeUndefined();
    expect(await kube.reviewToken('any', [EXCHANGE_AUDIENCE])).toMatchObject({
      authenticated: false,
    });
  }, 60_000);
});
