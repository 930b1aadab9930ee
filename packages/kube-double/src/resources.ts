// The API resources the double serves: what discovery lists and what the router accepts.

export type Verb =
  'create' | 'delete' | 'deletecollection' | 'get' | 'list' | 'patch' | 'update' | 'watch';

export interface ResourceType {
  group: string;
  version: string;
  /** The plural, lower-case name used in URLs and RBAC rules. */
  resource: string;
  kind: string;
  singular: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  verbs: Verb[];
  /** Subresources served, each with its own verbs (e.g. pods/status: get, patch, update). */
  subresources: Record<string, { kind: string; verbs: Verb[] }>;
  /** Reviews and requests: created, answered, never stored. */
  ephemeral?: boolean;
}

const CRUD: Verb[] = [
  'create',
  'delete',
  'deletecollection',
  'get',
  'list',
  'patch',
  'update',
  'watch',
];
const STATUS = (kind: string) => ({
  status: { kind, verbs: ['get', 'patch', 'update'] as Verb[] },
});

export const RESOURCE_TYPES: readonly ResourceType[] = [
  {
    group: '',
    version: 'v1',
    resource: 'namespaces',
    kind: 'Namespace',
    singular: 'namespace',
    namespaced: false,
    shortNames: ['ns'],
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
    subresources: STATUS('Namespace'),
  },
  {
    group: '',
    version: 'v1',
    resource: 'pods',
    kind: 'Pod',
    singular: 'pod',
    namespaced: true,
    shortNames: ['po'],
    categories: ['all'],
    verbs: CRUD,
    subresources: {
      ...STATUS('Pod'),
      binding: { kind: 'Binding', verbs: ['create'] },
      log: { kind: 'Pod', verbs: ['get'] },
    },
  },
  {
    group: '',
    version: 'v1',
    resource: 'nodes',
    kind: 'Node',
    singular: 'node',
    namespaced: false,
    shortNames: ['no'],
    verbs: CRUD,
    subresources: STATUS('Node'),
  },
  {
    group: '',
    version: 'v1',
    resource: 'secrets',
    kind: 'Secret',
    singular: 'secret',
    namespaced: true,
    verbs: CRUD,
    subresources: {},
  },
  {
    group: '',
    version: 'v1',
    resource: 'configmaps',
    kind: 'ConfigMap',
    singular: 'configmap',
    namespaced: true,
    shortNames: ['cm'],
    verbs: CRUD,
    subresources: {},
  },
  {
    group: '',
    version: 'v1',
    resource: 'serviceaccounts',
    kind: 'ServiceAccount',
    singular: 'serviceaccount',
    namespaced: true,
    shortNames: ['sa'],
    verbs: CRUD,
    subresources: { token: { kind: 'TokenRequest', verbs: ['create'] } },
  },
  {
    group: '',
    version: 'v1',
    resource: 'services',
    kind: 'Service',
    singular: 'service',
    namespaced: true,
    shortNames: ['svc'],
    categories: ['all'],
    verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'],
    subresources: STATUS('Service'),
  },
  {
    group: '',
    version: 'v1',
    resource: 'events',
    kind: 'Event',
    singular: 'event',
    namespaced: true,
    shortNames: ['ev'],
    verbs: CRUD,
    subresources: {},
  },
  {
    group: 'apps',
    version: 'v1',
    resource: 'deployments',
    kind: 'Deployment',
    singular: 'deployment',
    namespaced: true,
    shortNames: ['deploy'],
    categories: ['all'],
    verbs: CRUD,
    subresources: STATUS('Deployment'),
  },
  {
    group: 'networking.k8s.io',
    version: 'v1',
    resource: 'networkpolicies',
    kind: 'NetworkPolicy',
    singular: 'networkpolicy',
    namespaced: true,
    shortNames: ['netpol'],
    verbs: CRUD,
    subresources: {},
  },
  {
    group: 'policy',
    version: 'v1',
    resource: 'poddisruptionbudgets',
    kind: 'PodDisruptionBudget',
    singular: 'poddisruptionbudget',
    namespaced: true,
    shortNames: ['pdb'],
    verbs: CRUD,
    subresources: STATUS('PodDisruptionBudget'),
  },
  {
    group: 'coordination.k8s.io',
    version: 'v1',
    resource: 'leases',
    kind: 'Lease',
    singular: 'lease',
    namespaced: true,
    verbs: CRUD,
    subresources: {},
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'roles',
    kind: 'Role',
    singular: 'role',
    namespaced: true,
    verbs: CRUD,
    subresources: {},
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'rolebindings',
    kind: 'RoleBinding',
    singular: 'rolebinding',
    namespaced: true,
    verbs: CRUD,
    subresources: {},
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'clusterroles',
    kind: 'ClusterRole',
    singular: 'clusterrole',
    namespaced: false,
    verbs: CRUD,
    subresources: {},
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'clusterrolebindings',
    kind: 'ClusterRoleBinding',
    singular: 'clusterrolebinding',
    namespaced: false,
    verbs: CRUD,
    subresources: {},
  },
  {
    group: 'authentication.k8s.io',
    version: 'v1',
    resource: 'tokenreviews',
    kind: 'TokenReview',
    singular: 'tokenreview',
    namespaced: false,
    verbs: ['create'],
    subresources: {},
    ephemeral: true,
  },
  {
    group: 'authentication.k8s.io',
    version: 'v1',
    resource: 'selfsubjectreviews',
    kind: 'SelfSubjectReview',
    singular: 'selfsubjectreview',
    namespaced: false,
    verbs: ['create'],
    subresources: {},
    ephemeral: true,
  },
  {
    group: 'authorization.k8s.io',
    version: 'v1',
    resource: 'selfsubjectaccessreviews',
    kind: 'SelfSubjectAccessReview',
    singular: 'selfsubjectaccessreview',
    namespaced: false,
    verbs: ['create'],
    subresources: {},
    ephemeral: true,
  },
  {
    group: 'authorization.k8s.io',
    version: 'v1',
    resource: 'subjectaccessreviews',
    kind: 'SubjectAccessReview',
    singular: 'subjectaccessreview',
    namespaced: false,
    verbs: ['create'],
    subresources: {},
    ephemeral: true,
  },
];

export function groupVersion(type: Pick<ResourceType, 'group' | 'version'>): string {
  return type.group === '' ? type.version : `${type.group}/${type.version}`;
}

/** `pods` for the core group, `deployments.apps` otherwise: how Kubernetes names a resource in messages. */
export function qualifiedResource(type: Pick<ResourceType, 'group' | 'resource'>): string {
  return type.group === '' ? type.resource : `${type.resource}.${type.group}`;
}

export function findResourceType(
  group: string,
  version: string,
  resource: string,
): ResourceType | undefined {
  return RESOURCE_TYPES.find(
    (type) => type.group === group && type.version === version && type.resource === resource,
  );
}

export function findResourceTypeByKind(apiVersion: string, kind: string): ResourceType | undefined {
  return RESOURCE_TYPES.find((type) => groupVersion(type) === apiVersion && type.kind === kind);
}

export function apiGroups(): { group: string; version: string }[] {
  const seen = new Map<string, { group: string; version: string }>();
  for (const type of RESOURCE_TYPES) {
    if (type.group !== '') seen.set(type.group, { group: type.group, version: type.version });
  }
  return [...seen.values()];
}
