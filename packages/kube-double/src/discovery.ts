// Legacy (unaggregated) discovery: /api, /apis, /api/v1, /apis/<group>[/<version>], /version.
// Clients that ask for aggregated discovery (apidiscovery.k8s.io/v2) get these plain documents with
// Content-Type application/json and fall back to the legacy walk, as they do against an apiserver
// that predates aggregated discovery.
import { apiGroups, groupVersion, RESOURCE_TYPES, type ResourceType } from './resources.js';

export const SERVER_VERSION = {
  major: '1',
  minor: '32',
  gitVersion: 'v1.32.0-kube-double',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2026-01-01T00:00:00Z',
  goVersion: 'go1.23.0',
  compiler: 'gc',
  platform: 'linux/amd64',
};

export function coreVersions(serverAddress: string) {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

function groupDocument(group: string, version: string) {
  const versionEntry = { groupVersion: `${group}/${version}`, version };
  return { name: group, versions: [versionEntry], preferredVersion: versionEntry };
}

export function groupList() {
  return {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: apiGroups().map(({ group, version }) => groupDocument(group, version)),
  };
}

export function group(name: string) {
  const found = apiGroups().find((entry) => entry.group === name);
  if (found === undefined) return undefined;
  return { kind: 'APIGroup', apiVersion: 'v1', ...groupDocument(found.group, found.version) };
}

function resourceEntries(type: ResourceType) {
  const entries: Record<string, unknown>[] = [
    {
      name: type.resource,
      singularName: type.singular,
      namespaced: type.namespaced,
      kind: type.kind,
      verbs: type.verbs,
      ...(type.shortNames ? { shortNames: type.shortNames } : {}),
      ...(type.categories ? { categories: type.categories } : {}),
    },
  ];
  for (const [name, subresource] of Object.entries(type.subresources)) {
    const entry: Record<string, unknown> = {
      name: `${type.resource}/${name}`,
      singularName: '',
      namespaced: type.namespaced,
      kind: subresource.kind,
      verbs: subresource.verbs,
    };
    if (name === 'token') Object.assign(entry, { group: 'authentication.k8s.io', version: 'v1' });
    entries.push(entry);
  }
  return entries;
}

export function resourceList(group: string, version: string) {
  const types = RESOURCE_TYPES.filter((type) => type.group === group && type.version === version);
  if (types.length === 0) return undefined;
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: groupVersion({ group, version }),
    resources: types.flatMap(resourceEntries),
  };
}
