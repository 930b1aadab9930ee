/**
 * The exchange's grant is cluster-scoped, so two installs in one cluster must not share its
 * names: the second one's `kubectl apply` would rebind the first one's ClusterRoleBinding to
 * itself (and deleting either install would delete the other's grant). An overlay's nameSuffix
 * keeps them apart, and kustomize keeps the binding's roleRef and subject in step — rendered here
 * by the real `kubectl kustomize`.
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(fileURLToPath(import.meta.url), '../../..');

interface Rendered {
  kind: string;
  metadata: { name: string; namespace?: string };
  roleRef?: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

async function clusterScoped(overlay: string): Promise<Rendered[]> {
  const { stdout } = await promisify(execFile)(
    '/usr/bin/kubectl',
    ['kustomize', resolve(ROOT, overlay)],
    { encoding: 'utf8' },
  );
  return parseAllDocuments(stdout)
    .map((d) => d.toJSON() as Rendered)
    .filter((o) => o.kind.startsWith('Cluster'));
}

describe('deploy/components/exchange: two installs in one cluster', () => {
  it('a nameSuffix gives the second install its own ClusterRole and binding, still bound to its own account', async () => {
    const first = await clusterScoped('test/deploy/fixtures/exchange');
    const second = await clusterScoped('test/deploy/fixtures/exchange-second-install');
    const names = (objs: Rendered[]) => objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    // Nothing cluster-scoped is shared between the two.
    expect(names(second).filter((n) => names(first).includes(n))).toEqual([]);
    const binding = second.find((o) => o.kind === 'ClusterRoleBinding');
    const role = second.find((o) => o.kind === 'ClusterRole');
    expect(binding?.roleRef).toMatchObject({ kind: 'ClusterRole', name: role?.metadata.name });
    expect(binding?.subjects).toEqual([
      {
        kind: 'ServiceAccount',
        name: 'leoflow-control-plane-staging',
        namespace: 'leoflow-staging',
      },
    ]);
  });
});
