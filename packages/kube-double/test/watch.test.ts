// Watch semantics through @kubernetes/client-node (the executor's client) over HTTPS with the
// generated kubeconfig: resume from a resourceVersion, bookmarks, 410 Gone once the history is
// compacted, and selector-filtered watches turning a leaver into DELETED.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeDouble, type KubeDouble } from '../src/index.js';
import { REAL_CLUSTER } from './support/cluster.js';

let double: KubeDouble;
let config: KubeConfig;
let core: CoreV1Api;
let dir: string;
const ns = 'watching';

interface Seen {
  type: string;
  name?: string;
  resourceVersion?: string;
  object: Record<string, unknown>;
}

/** Opens a watch and collects its events until `until` says stop. */
async function watchUntil(
  path: string,
  query: Record<string, string | number | boolean | undefined>,
  until: (seen: Seen[]) => boolean,
  afterOpen?: () => Promise<void>,
): Promise<Seen[]> {
  const seen: Seen[] = [];
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const controller = await new Watch(config).watch(
    path,
    query,
    (type: string, object: Record<string, unknown>) => {
      const metadata = (object.metadata ?? {}) as { name?: string; resourceVersion?: string };
      seen.push({ type, name: metadata.name, resourceVersion: metadata.resourceVersion, object });
      if (until(seen)) finish();
    },
    () => finish(),
  );
  if (afterOpen) await afterOpen();
  const timer = setTimeout(finish, 5000);
  await finished;
  clearTimeout(timer);
  controller.abort();
  return seen;
}

const configMap = (name: string, labels: Record<string, string> = {}) => ({
  metadata: { name, labels },
  data: { v: '1' },
});

describe.skipIf(REAL_CLUSTER)('watch through @kubernetes/client-node', () => {
  beforeAll(async () => {
    double = await startKubeDouble();
    dir = mkdtempSync(join(tmpdir(), 'kube-double-watch-'));
    config = new KubeConfig();
    config.loadFromFile(double.kubeconfig(dir));
    core = config.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: ns } } });
  });
  afterAll(async () => {
    await double?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('resumes from a resourceVersion: only the later events, in order', async () => {
    const first = await core.createNamespacedConfigMap({
      namespace: ns,
      body: configMap('resume-a'),
    });
    const from = first.metadata?.resourceVersion ?? '';
    await core.createNamespacedConfigMap({ namespace: ns, body: configMap('resume-b') });
    await core.replaceNamespacedConfigMap({
      namespace: ns,
      name: 'resume-a',
      body: { ...first, data: { v: '2' } },
    });
    const seen = await watchUntil(
      `/api/v1/namespaces/${ns}/configmaps`,
      { resourceVersion: from },
      (events) => events.length >= 2,
    );
    expect(seen.map((event) => [event.type, event.name])).toEqual([
      ['ADDED', 'resume-b'],
      ['MODIFIED', 'resume-a'],
    ]);
    const versions = seen.map((event) => Number(event.resourceVersion));
    expect(versions[0]).toBeGreaterThan(Number(from));
    expect(versions[1]).toBeGreaterThan(versions[0] ?? 0);
  });

  it('starts an unversioned watch with an ADDED per existing object', async () => {
    const list = await core.listNamespacedConfigMap({ namespace: ns });
    const seen = await watchUntil(
      `/api/v1/namespaces/${ns}/configmaps`,
      {},
      (events) => events.length >= list.items.length,
    );
    expect(seen.every((event) => event.type === 'ADDED')).toBe(true);
    expect(seen.map((event) => event.name).sort()).toEqual(
      list.items.map((item) => item.metadata?.name).sort(),
    );
  });

  it('sends bookmarks carrying the current resourceVersion when allowed and the resource moved on unseen', async () => {
    const list = await core.listNamespacedConfigMap({ namespace: ns });
    const seen = await watchUntil(
      `/api/v1/namespaces/${ns}/configmaps`,
      { resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: true },
      (events) => events.some((event) => event.type === 'BOOKMARK'),
      async () => {
        await core.createNamespacedConfigMap({ namespace: ns, body: configMap('bookmarked') });
        // seen by this watch: no progress to report yet
        double.api.watches.emitBookmarks();
        await core.createNamespacedConfigMap({
          namespace: 'default',
          body: configMap('elsewhere'),
        });
        double.api.watches.emitBookmarks();
      },
    );
    expect(seen.map((event) => event.type)).toEqual(['ADDED', 'BOOKMARK']);
    const bookmark = seen.find((event) => event.type === 'BOOKMARK');
    expect(bookmark?.object).toMatchObject({ kind: 'ConfigMap', apiVersion: 'v1' });
    expect(bookmark?.resourceVersion).toBe(String(double.store.currentRevision()));
  });

  it('sends no bookmark to a watch that did not allow them', async () => {
    const list = await core.listNamespacedConfigMap({ namespace: ns });
    const seen = await watchUntil(
      `/api/v1/namespaces/${ns}/configmaps`,
      { resourceVersion: list.metadata?.resourceVersion },
      (events) => events.some((event) => event.name === 'after-no-bookmark'),
      async () => {
        double.api.watches.emitBookmarks();
        await core.createNamespacedConfigMap({
          namespace: ns,
          body: configMap('after-no-bookmark'),
        });
      },
    );
    expect(seen.map((event) => event.type)).toEqual(['ADDED']);
  });

  it('answers a compacted resourceVersion with an ERROR event carrying 410 Expired', async () => {
    const old =
      (await core.listNamespacedConfigMap({ namespace: ns })).metadata?.resourceVersion ?? '';
    await core.createNamespacedConfigMap({ namespace: ns, body: configMap('after-compaction') });
    double.store.compact();
    const seen = await watchUntil(
      `/api/v1/namespaces/${ns}/configmaps`,
      { resourceVersion: old },
      (events) => events.length >= 1,
    );
    expect(seen[0]?.type).toBe('ERROR');
    expect(seen[0]?.object).toMatchObject({ kind: 'Status', code: 410, reason: 'Expired' });
    expect(String(seen[0]?.object.message)).toMatch(
      new RegExp(`^too old resource version: ${old} \\(\\d+\\)$`),
    );
  });

  it('filters by label selector: a leaver is DELETED, a joiner ADDED', async () => {
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: configMap('mover', { tier: 'a' }),
    });
    const from = (await core.listNamespacedConfigMap({ namespace: ns })).metadata?.resourceVersion;
    const seen = await watchUntil(
      `/api/v1/namespaces/${ns}/configmaps`,
      { resourceVersion: from, labelSelector: 'tier=a' },
      (events) => events.length >= 2,
      async () => {
        const current = await core.readNamespacedConfigMap({ namespace: ns, name: 'mover' });
        const moved = await core.replaceNamespacedConfigMap({
          namespace: ns,
          name: 'mover',
          body: { ...current, metadata: { ...current.metadata, labels: { tier: 'b' } } },
        });
        await core.replaceNamespacedConfigMap({
          namespace: ns,
          name: 'mover',
          body: { ...moved, metadata: { ...moved.metadata, labels: { tier: 'a' } } },
        });
      },
    );
    expect(seen.map((event) => [event.type, event.name])).toEqual([
      ['DELETED', 'mover'],
      ['ADDED', 'mover'],
    ]);
  });

  it('refuses a stale update with 409 Conflict', async () => {
    const created = await core.createNamespacedConfigMap({
      namespace: ns,
      body: configMap('optimistic'),
    });
    await core.replaceNamespacedConfigMap({
      namespace: ns,
      name: 'optimistic',
      body: { ...created, data: { v: '2' } },
    });
    await expect(
      core.replaceNamespacedConfigMap({
        namespace: ns,
        name: 'optimistic',
        body: { ...created, data: { v: '3' } },
      }),
    ).rejects.toMatchObject({ code: 409 });
  });
});
