/**
 * The exchange's grant is cluster-scoped, so two installs in one cluster must not share its
 * names: the second one's `kubectl apply` would rebind the first one's ClusterRoleBinding to
 * itself (and deleting either install would delete the other's grant). An overlay's nameSuffix
 * keeps them apart, and kustomize keeps the binding's roleRef and subject in step — rendered here
 * by the real `kubectl kustomize`.
 */
import { describe, expect, it } from 'vitest';
import { at, find, render, type Manifest } from '../support/manifests.js';

const clusterScoped = (overlay: string) =>
  render(overlay).filter((o) => o.kind.startsWith('Cluster'));

describe('deploy/components/exchange: two installs in one cluster', () => {
  it('a nameSuffix gives the second install its own ClusterRole and binding, still bound to its own account', () => {
    const first = clusterScoped('test/deploy/fixtures/exchange');
    const second = clusterScoped('test/deploy/fixtures/exchange-second-install');
    const names = (objs: Manifest[]) => objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    // Nothing cluster-scoped is shared between the two.
    expect(names(second).filter((n) => names(first).includes(n))).toEqual([]);
    const binding = find(second, 'ClusterRoleBinding');
    const role = find(second, 'ClusterRole');
    expect(at(binding, 'roleRef')).toMatchObject({ kind: 'ClusterRole', name: role.metadata.name });
    expect(at(binding, 'subjects')).toEqual([
      {
        kind: 'ServiceAccount',
        name: 'leoflow-control-plane-staging',
        namespace: 'leoflow-staging',
      },
    ]);
  });
});
