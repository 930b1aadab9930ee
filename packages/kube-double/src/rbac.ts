// RBAC authorization: the Roles, ClusterRoles and their bindings in the store, evaluated the way
// the RBAC authorizer does (a request is allowed when any rule of any role bound to the user, its
// groups or its service account covers verb, API group, resource[/subresource] and name).
import type { KubeObject, PolicyRule, RoleBindingObject, RoleObject, Subject } from './objects.js';
import { findResourceType, type ResourceType } from './resources.js';
import type { ObjectStore } from './store.js';
import type { UserInfo } from './service-account-tokens.js';

export interface RequestAttributes {
  user: UserInfo;
  verb: string;
  resourceRequest: boolean;
  apiGroup: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
  /** For non-resource requests (/version, /api, ...). */
  path: string;
}

function rbacType(resource: string): ResourceType {
  const found = findResourceType('rbac.authorization.k8s.io', 'v1', resource);
  if (found === undefined) throw new Error(`rbac resource ${resource} is not registered`);
  return found;
}

function matchesAny(values: string[] | undefined, wanted: string): boolean {
  return (values ?? []).some((value) => value === '*' || value === wanted);
}

function resourceMatches(rule: PolicyRule, resource: string, subresource: string): boolean {
  const combined = subresource === '' ? resource : `${resource}/${subresource}`;
  return (rule.resources ?? []).some(
    (value) =>
      value === '*' ||
      value === combined ||
      (subresource !== '' && value.startsWith('*/') && value.slice(2) === subresource),
  );
}

function nonResourceMatches(rule: PolicyRule, path: string): boolean {
  return (rule.nonResourceURLs ?? []).some(
    (value) =>
      value === '*' ||
      value === path ||
      (value.endsWith('*') && path.startsWith(value.slice(0, -1))),
  );
}

export function ruleAllows(rule: PolicyRule, attributes: RequestAttributes): boolean {
  if (!matchesAny(rule.verbs, attributes.verb)) return false;
  if (!attributes.resourceRequest) return nonResourceMatches(rule, attributes.path);
  if (!matchesAny(rule.apiGroups, attributes.apiGroup)) return false;
  if (!resourceMatches(rule, attributes.resource, attributes.subresource)) return false;
  const names = rule.resourceNames ?? [];
  return names.length === 0 || names.includes(attributes.name);
}

function subjectMatches(subject: Subject, user: UserInfo, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case 'User':
      return subject.name === user.username;
    case 'Group':
      return user.groups.includes(subject.name);
    case 'ServiceAccount':
      return (
        user.username ===
        `system:serviceaccount:${subject.namespace ?? bindingNamespace}:${subject.name}`
      );
  }
}

export class RbacAuthorizer {
  constructor(private readonly store: ObjectStore) {}

  /** The rules that apply to `user` in `namespace` ('' for cluster-wide only). */
  rulesFor(user: UserInfo, namespace: string): PolicyRule[] {
    const rules: PolicyRule[] = [];
    const bound = (binding: RoleBindingObject, bindingNamespace: string) =>
      (binding.subjects ?? []).some((subject) => subjectMatches(subject, user, bindingNamespace));
    for (const object of this.store.list(rbacType('clusterrolebindings'))) {
      const binding = object as RoleBindingObject;
      if (binding.roleRef?.kind !== 'ClusterRole' || !bound(binding, '')) continue;
      rules.push(...this.roleRules('ClusterRole', '', binding.roleRef.name));
    }
    if (namespace !== '') {
      for (const object of this.store.list(rbacType('rolebindings'), namespace)) {
        const binding = object as RoleBindingObject;
        if (!bound(binding, namespace)) continue;
        rules.push(...this.roleRules(binding.roleRef?.kind, namespace, binding.roleRef?.name));
      }
    }
    return rules;
  }

  authorize(attributes: RequestAttributes): boolean {
    // system:masters is the privileged group: the apiserver allows it before consulting RBAC.
    if (attributes.user.groups.includes('system:masters')) return true;
    return this.rulesFor(attributes.user, attributes.namespace).some((rule) =>
      ruleAllows(rule, attributes),
    );
  }

  private roleRules(
    kind: string | undefined,
    namespace: string,
    name: string | undefined,
  ): PolicyRule[] {
    if (name === undefined) return [];
    let role: RoleObject | undefined;
    if (kind === 'ClusterRole')
      role = this.store.get<RoleObject>(rbacType('clusterroles'), undefined, name);
    else if (kind === 'Role') role = this.store.get<RoleObject>(rbacType('roles'), namespace, name);
    return role?.rules ?? [];
  }
}

/** The text after `is forbidden: ` in the 403 a denied request receives. */
export function forbiddenReason(attributes: RequestAttributes): string {
  const user = `User "${attributes.user.username}"`;
  if (!attributes.resourceRequest)
    return `${user} cannot ${attributes.verb} path "${attributes.path}"`;
  const resource =
    attributes.subresource === ''
      ? attributes.resource
      : `${attributes.resource}/${attributes.subresource}`;
  const scope =
    attributes.namespace === ''
      ? 'at the cluster scope'
      : `in the namespace "${attributes.namespace}"`;
  return `${user} cannot ${attributes.verb} resource "${resource}" in API group "${attributes.apiGroup}" ${scope}`;
}

/** The roles and bindings every cluster bootstraps that the double's clients rely on. */
export function bootstrapPolicy(): KubeObject[] {
  const clusterRole = (name: string, rules: PolicyRule[]): KubeObject => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name, labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' } },
    rules,
  });
  const binding = (name: string, role: string, groups: string[]): KubeObject => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name, labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: groups.map((group) => ({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Group',
      name: group,
    })),
  });
  return [
    clusterRole('cluster-admin', [
      { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
      { nonResourceURLs: ['*'], verbs: ['*'] },
    ]),
    clusterRole('system:basic-user', [
      {
        apiGroups: ['authorization.k8s.io'],
        resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'],
        verbs: ['create'],
      },
      {
        apiGroups: ['authentication.k8s.io'],
        resources: ['selfsubjectreviews'],
        verbs: ['create'],
      },
    ]),
    clusterRole('system:discovery', [
      {
        nonResourceURLs: [
          '/api',
          '/api/*',
          '/apis',
          '/apis/*',
          '/healthz',
          '/livez',
          '/openapi',
          '/openapi/*',
          '/readyz',
          '/version',
          '/version/',
        ],
        verbs: ['get'],
      },
    ]),
    clusterRole('system:public-info-viewer', [
      {
        nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'],
        verbs: ['get'],
      },
    ]),
    clusterRole('system:service-account-issuer-discovery', [
      { nonResourceURLs: ['/.well-known/openid-configuration', '/openid/v1/jwks'], verbs: ['get'] },
    ]),
    binding('cluster-admin', 'cluster-admin', ['system:masters']),
    binding('system:basic-user', 'system:basic-user', ['system:authenticated']),
    binding('system:discovery', 'system:discovery', ['system:authenticated']),
    binding('system:public-info-viewer', 'system:public-info-viewer', [
      'system:authenticated',
      'system:unauthenticated',
    ]),
    binding('system:service-account-issuer-discovery', 'system:service-account-issuer-discovery', [
      'system:serviceaccounts',
    ]),
  ];
}
