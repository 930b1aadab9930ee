/**
 * A task's Kubernetes choices (`kubernetes:` in leoflow.yaml) and the operator's per-tenant
 * allowlist they must fall within. Where a task runs is the operator's decision: a DAG may only
 * pick among the service accounts and images the operator listed for its tenant, and ask for
 * resources up to the operator's ceilings. An author-chosen service account outside that list
 * would be a confused deputy (the control plane creating a pod with privileges its author never
 * had), so it is refused before the DAG is registered, never at dispatch.
 */
import { childPath } from './diagnostics.js';

export const KUBERNETES_RESOURCE_NAMES = ['cpu', 'memory', 'ephemeral-storage'] as const;
export type KubernetesResourceName = (typeof KUBERNETES_RESOURCE_NAMES)[number];
export type ResourceList = Partial<Record<KubernetesResourceName, string>>;

export interface TaskResources {
  requests?: ResourceList;
  limits?: ResourceList;
}

/** What a task may choose; every field optional (absent = the tenant's default). */
export interface TaskKubernetes {
  image?: string;
  service_account?: string;
  resources?: TaskResources;
}

export const TASK_KUBERNETES_KEYS = ['image', 'service_account', 'resources'] as const;

/** The operator's allowlist for one tenant (executor.kubernetes.tenants.<id>). */
export interface KubernetesAllowlist {
  /** allowed images; the first is the default */
  images: string[];
  /** allowed service accounts; the first is the default */
  serviceAccounts: string[];
  /** ceilings on what one task's pod may request or limit */
  maxResources: ResourceList;
  /** what a task that asks for nothing gets */
  defaultResources: TaskResources;
}

/** A Kubernetes resource quantity (1, 0.5, 500m, 128Mi, 1G, 1e3), as an exact rational-free number. */
const QUANTITY =
  /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;

const SUFFIX: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/**
 * The value of a quantity, or undefined when it is not one. Good to compare quantities against
 * ceilings (a float is exact enough at the magnitudes a pod asks for), not to do arithmetic.
 */
export function parseQuantity(text: string): number | undefined {
  const m = QUANTITY.exec(text);
  if (!m) return undefined;
  const [, sign, digits, suffix = ''] = m;
  const scale = /^[eE]/.test(suffix) ? 10 ** Number(suffix.slice(1)) : SUFFIX[suffix]!;
  const v = Number(digits) * scale;
  if (!Number.isFinite(v)) return undefined;
  return sign === '-' ? -v : v;
}

/** A Kubernetes object name (DNS-1123 subdomain), the shape of a service account name. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** An image reference: no whitespace or control characters; Kubernetes checks the rest. */
const IMAGE_REF = /^[^\s\u0000-\u001f]{1,1024}$/;

export interface KubernetesIssue {
  /** YAML-style path of the offending value */
  path: string;
  message: string;
  hint: string;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Shape checks on a task's `kubernetes:` value that need no allowlist: only known keys, names
 * and quantities well formed, requests not above limits. `base` is the value's path.
 */
export function checkKubernetesShape(value: unknown, base: string): KubernetesIssue[] {
  const issues: KubernetesIssue[] = [];
  if (!isPlainObject(value)) {
    issues.push({
      path: base,
      message: 'kubernetes must be a mapping of image, service_account and resources',
      hint: 'write kubernetes:\n      image: <an image your operator allows>',
    });
    return issues;
  }
  for (const key of Object.keys(value)) {
    if (!(TASK_KUBERNETES_KEYS as readonly string[]).includes(key)) {
      issues.push({
        path: childPath(base, key),
        message: `kubernetes.${key} is not a key a task may set`,
        hint: `a task may set only ${TASK_KUBERNETES_KEYS.join(', ')}; where it runs (namespace, node, security) is the operator's choice`,
      });
    }
  }
  if (value.image !== undefined) {
    if (typeof value.image !== 'string' || !IMAGE_REF.test(value.image)) {
      issues.push({
        path: childPath(base, 'image'),
        message: 'kubernetes.image must be an image reference',
        hint: 'write image: registry.example.com/team/leoflow-agent:1.2',
      });
    }
  }
  if (value.service_account !== undefined) {
    const sa = value.service_account;
    if (typeof sa !== 'string' || sa.length > 253 || !DNS_SUBDOMAIN.test(sa)) {
      issues.push({
        path: childPath(base, 'service_account'),
        message: 'kubernetes.service_account must be a Kubernetes object name',
        hint: 'lower-case letters, digits, - and ., e.g. etl-reader',
      });
    }
  }
  if (value.resources !== undefined) {
    const rpath = childPath(base, 'resources');
    const res = value.resources;
    if (!isPlainObject(res)) {
      issues.push({
        path: rpath,
        message: 'kubernetes.resources must be a mapping of requests and limits',
        hint: 'write resources:\n        limits: {cpu: "1", memory: 512Mi}',
      });
      return issues;
    }
    for (const key of Object.keys(res)) {
      if (key !== 'requests' && key !== 'limits') {
        issues.push({
          path: childPath(rpath, key),
          message: `kubernetes.resources.${key} is not requests or limits`,
          hint: 'write requests: and limits: only',
        });
      }
    }
    for (const side of ['requests', 'limits'] as const) {
      const list = res[side];
      if (list === undefined) continue;
      const lpath = childPath(rpath, side);
      if (!isPlainObject(list)) {
        issues.push({
          path: lpath,
          message: `kubernetes.resources.${side} must be a mapping of resource: quantity`,
          hint: `write ${side}: {cpu: 500m, memory: 256Mi}`,
        });
        continue;
      }
      for (const [name, q] of Object.entries(list)) {
        const qpath = childPath(lpath, name);
        if (!(KUBERNETES_RESOURCE_NAMES as readonly string[]).includes(name)) {
          issues.push({
            path: qpath,
            message: `"${name}" is not a resource a task may ask for`,
            hint: `use ${KUBERNETES_RESOURCE_NAMES.join(', ')}`,
          });
        } else if (typeof q !== 'string' || (parseQuantity(q) ?? -1) < 0) {
          issues.push({
            path: qpath,
            message: `${side}.${name} must be a non-negative Kubernetes quantity, as a string`,
            hint: 'e.g. "500m" or "1" for cpu, "256Mi" or "1Gi" for memory (quote plain numbers)',
          });
        }
      }
    }
    if (isPlainObject(res.requests) && isPlainObject(res.limits)) {
      for (const name of KUBERNETES_RESOURCE_NAMES) {
        const req = res.requests[name];
        const lim = res.limits[name];
        if (typeof req !== 'string' || typeof lim !== 'string') continue;
        const r = parseQuantity(req);
        const l = parseQuantity(lim);
        if (r !== undefined && l !== undefined && r > l) {
          issues.push({
            path: childPath(childPath(rpath, 'requests'), name),
            message: `requests.${name} (${req}) is above limits.${name} (${lim})`,
            hint: 'a request may not exceed its limit; raise the limit or lower the request',
          });
        }
      }
    }
  }
  return issues;
}

/**
 * A task's well-formed choices against its tenant's allowlist. `allowlist` undefined means the
 * tenant has no Kubernetes configuration at all, so any choice (and `executor: kubernetes`) is
 * refused. The resolved pod settings come from resolveKubernetesChoices.
 */
export function checkKubernetesAllowed(
  choice: TaskKubernetes | undefined,
  allowlist: KubernetesAllowlist,
  base: string,
): KubernetesIssue[] {
  const issues: KubernetesIssue[] = [];
  if (!choice) return issues;
  if (choice.image !== undefined && !allowlist.images.includes(choice.image)) {
    issues.push({
      path: childPath(base, 'image'),
      message: `image "${choice.image}" is not on this tenant's image allowlist`,
      hint: `use one of: ${allowlist.images.join(', ')} (or ask your operator to allow it)`,
    });
  }
  if (
    choice.service_account !== undefined &&
    !allowlist.serviceAccounts.includes(choice.service_account)
  ) {
    issues.push({
      path: childPath(base, 'service_account'),
      message: `service account "${choice.service_account}" is not on this tenant's allowlist`,
      hint: `use one of: ${allowlist.serviceAccounts.join(', ')}; a DAG cannot pick the identity its pods run as beyond what the operator allows`,
    });
  }
  for (const side of ['requests', 'limits'] as const) {
    const list = choice.resources?.[side] ?? {};
    for (const name of KUBERNETES_RESOURCE_NAMES) {
      const asked = list[name];
      if (asked === undefined) continue;
      const ceiling = allowlist.maxResources[name];
      const path = childPath(childPath(childPath(base, 'resources'), side), name);
      if (ceiling === undefined) {
        issues.push({
          path,
          message: `${side}.${name} is not a resource this tenant's tasks may set`,
          hint: `remove it; the operator sets no ceiling for ${name}`,
        });
        continue;
      }
      if ((parseQuantity(asked) ?? Infinity) > (parseQuantity(ceiling) ?? -Infinity)) {
        issues.push({
          path,
          message: `${side}.${name} ${asked} is above this tenant's ceiling of ${ceiling}`,
          hint: `ask for at most ${ceiling}`,
        });
      }
    }
  }
  return issues;
}

/** The settings a task's pod gets: its choices where it made them, the tenant's defaults else. */
export interface ResolvedKubernetes {
  image: string;
  serviceAccount: string;
  resources: { requests: ResourceList; limits: ResourceList };
}

/**
 * Resolves a task's choices against the allowlist. Throws when a choice is outside it: by then
 * registration has refused such a DAG, so reaching here means the allowlist shrank since, and
 * the pod must still not be created.
 */
export function resolveKubernetesChoices(
  choice: TaskKubernetes | undefined,
  allowlist: KubernetesAllowlist,
): ResolvedKubernetes {
  const issues = checkKubernetesAllowed(choice, allowlist, 'kubernetes');
  if (issues.length > 0) {
    throw new KubernetesChoiceError(issues);
  }
  const image = choice?.image ?? allowlist.images[0];
  const serviceAccount = choice?.service_account ?? allowlist.serviceAccounts[0];
  if (image === undefined || serviceAccount === undefined) {
    throw new KubernetesChoiceError([
      {
        path: 'kubernetes',
        message: 'the tenant allowlist names no image or no service account',
        hint: 'list at least one image and one service account for the tenant',
      },
    ]);
  }
  // A task that sets either side takes over the whole side (a partial merge would pair a task's
  // limit with a default request above it).
  const requests = {
    ...(choice?.resources?.requests ?? allowlist.defaultResources.requests ?? {}),
  };
  const limits = { ...(choice?.resources?.limits ?? allowlist.defaultResources.limits ?? {}) };
  for (const name of KUBERNETES_RESOURCE_NAMES) {
    const r = requests[name];
    const l = limits[name];
    // A default request above a task's own, lower limit is lowered to it.
    if (r !== undefined && l !== undefined && parseQuantity(r)! > parseQuantity(l)!)
      requests[name] = l;
  }
  return { image, serviceAccount, resources: { requests, limits } };
}

export class KubernetesChoiceError extends Error {
  constructor(readonly issues: KubernetesIssue[]) {
    super(issues.map((i) => `${i.path}: ${i.message}`).join('; '));
    this.name = 'KubernetesChoiceError';
  }
}
