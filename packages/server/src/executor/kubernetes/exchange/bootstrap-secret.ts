import { randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The SecretKeyRef fallback's bootstrap credential (auth.exchange_bootstrap=secret_key_ref), for
 * clusters that cannot project a service-account token: a per-attempt Secret the executor creates
 * before the pod, owned by the pod, read by the kubelet into the agent's env through
 * valueFrom.secretKeyRef. The value names its own Secret, so the exchange reads exactly one object
 * to check it: `<namespace>/<secret name>/<43 base64url chars of 32 random bytes>`.
 *
 * Its own module (no Kubernetes client) so the pod builder, the executor and the exchange share it.
 */

/** The data key of the Secret, and the env var the agent reads it from. */
export const BOOTSTRAP_SECRET_KEY = 'bootstrap';
export const EXCHANGE_BOOTSTRAP_ENV = 'LEOFLOW_EXCHANGE_BOOTSTRAP';
/** Marks a bootstrap Secret (label leoflow.io/component). */
export const BOOTSTRAP_SECRET_COMPONENT = 'exchange-bootstrap';

const RANDOM_BYTES = 32;
/** DNS-1123 label (namespace) and subdomain (Secret name), as the apiserver validates them. */
const NAMESPACE_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const NAME_RE = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const RANDOM_RE = /^[A-Za-z0-9_-]{43}$/;

export interface BootstrapLocator {
  readonly namespace: string;
  readonly name: string;
}

/** The Secret that holds a pod's bootstrap credential. */
export function bootstrapSecretName(podName: string): string {
  return `${podName}-bootstrap`;
}

/** A fresh credential for the Secret `namespace/name`. */
export function newBootstrapValue(locator: BootstrapLocator): string {
  return `${locator.namespace}/${locator.name}/${randomBytes(RANDOM_BYTES).toString('base64url')}`;
}

/** The Secret a presented value claims to be in; undefined = not a bootstrap value at all. */
export function parseBootstrapLocator(value: string): BootstrapLocator | undefined {
  const parts = value.split('/');
  if (parts.length !== 3) return undefined;
  const [namespace, name, random] = parts as [string, string, string];
  if (!NAMESPACE_RE.test(namespace) || !NAME_RE.test(name) || !RANDOM_RE.test(random)) {
    return undefined;
  }
  return { namespace, name };
}

/** Constant-time over the whole value (locator included): no early exit on a shared prefix. */
export function bootstrapValueMatches(presented: string, stored: string): boolean {
  const a = Buffer.from(presented, 'utf8');
  const b = Buffer.from(stored, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}
