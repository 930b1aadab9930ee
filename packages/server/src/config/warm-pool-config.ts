import { SectionReader, show, type Problem } from './section-reader.js';

import type { KubernetesTenantConfig } from './kubernetes-tenant-config.js';

/**
 * One warm pool (executor.kubernetes.warm_pools[n]): pods kept started and idle for one
 * tenant's attempts that run as `service_account` in `image`. Those three are the pool's key —
 * what isolates it — so an attempt only ever lands in a pod that ran attempts of the same
 * tenant, identity and image.
 */
export interface WarmPoolConfig {
  tenant: string;
  /** always the tenant's namespace (a pool cannot place pods elsewhere) */
  namespace: string;
  serviceAccount: string;
  image: string;
  /** pods kept idle (started, bootstrapped, waiting) */
  minIdle: number;
  /** pods of this pool at most, idle and busy */
  maxSize: number;
  /** a worker is recycled after this many attempts */
  maxAttemptsPerWorker: number;
  /** … or this long after its pod was created (ms) */
  maxWorkerLifetimeMs: number;
  /** … or after sitting idle this long (ms), when the pool has more than min_idle */
  idleTtlMs: number;
  /**
   * Each attempt in the pod runs under its own uid (default true): the worker then runs as root
   * with only the capabilities that takes, so the namespace must admit Pod Security `baseline`.
   * false: a `restricted` pod, every attempt under the worker's one uid.
   */
  attemptUids?: boolean;
}

export const WARM_POOL_DEFAULTS = Object.freeze({
  minIdle: 1,
  maxSize: 8,
  maxAttemptsPerWorker: 50,
  maxWorkerLifetimeMs: 3_600_000,
  idleTtlMs: 300_000,
});

const POOL_KEYS = [
  'tenant',
  'service_account',
  'image',
  'min_idle',
  'max_size',
  'max_attempts_per_worker',
  'max_worker_lifetime',
  'worker_idle_ttl',
  'attempt_uids',
];

/**
 * Parses executor.kubernetes.warm_pools against the already-parsed tenants: a pool may only use
 * a service account and image its tenant allows, in its tenant's namespace. Every problem is
 * reported with its dotted key (LF_CONFIG_INVALID, collected by the caller).
 */
export function parseWarmPools(
  raw: unknown,
  tenants: Readonly<Record<string, KubernetesTenantConfig>>,
  agentImage: string | null,
  base: string,
  problem: Problem,
): WarmPoolConfig[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) {
    problem(base, `${base} must be a list of pools (- tenant: acme\n  service_account: etl)`);
    return [];
  }
  const out: WarmPoolConfig[] = [];
  const seen = new Map<string, number>();
  raw.forEach((p: unknown, n: number) => {
    const at = `${base}[${n}]`;
    if (typeof p !== 'object' || p === null || Array.isArray(p)) {
      problem(at, `${at} must be a mapping (tenant, service_account, image, min_idle, …)`);
      return;
    }
    const r = p as Record<string, unknown>;
    for (const k of Object.keys(r)) {
      if (!POOL_KEYS.includes(k)) {
        problem(
          `${at}.${k}`,
          `unknown configuration key ${at}.${k}; a pool takes ${POOL_KEYS.join(', ')}`,
        );
      }
    }
    let ok = true;
    const tenantId = r.tenant;
    const tenant = typeof tenantId === 'string' ? tenants[tenantId] : undefined;
    if (typeof tenantId !== 'string' || !tenant) {
      problem(
        `${at}.tenant`,
        `${at}.tenant is ${show(tenantId)}; set it to a tenant of executor.kubernetes.tenants (${Object.keys(tenants).join(', ') || 'none configured'})`,
      );
      return;
    }
    const sa = r.service_account ?? tenant.serviceAccounts[0];
    if (typeof sa !== 'string' || !tenant.serviceAccounts.includes(sa)) {
      problem(
        `${at}.service_account`,
        `${at}.service_account is ${show(sa)}; set it to one of the tenant's service_accounts (${tenant.serviceAccounts.join(', ')})`,
      );
      ok = false;
    }
    const allowedImages = tenant.images.length > 0 ? tenant.images : agentImage ? [agentImage] : [];
    const image = r.image ?? allowedImages[0];
    if (typeof image !== 'string' || !allowedImages.includes(image)) {
      problem(
        `${at}.image`,
        `${at}.image is ${show(image)}; set it to one of the tenant's images (${allowedImages.join(', ')})`,
      );
      ok = false;
    }
    const read = new SectionReader(r, at, problem);
    const minIdle = read.int('min_idle', WARM_POOL_DEFAULTS.minIdle, 0);
    const maxSize = read.int('max_size', WARM_POOL_DEFAULTS.maxSize, 1);
    if (minIdle > maxSize) {
      problem(
        `${at}.min_idle`,
        `${at}.min_idle is ${minIdle}, more than max_size ${maxSize}; lower it or raise max_size`,
      );
      ok = false;
    }
    const pool: WarmPoolConfig = {
      tenant: tenantId,
      namespace: tenant.namespace,
      serviceAccount: typeof sa === 'string' ? sa : '',
      image: typeof image === 'string' ? image : '',
      minIdle,
      maxSize,
      maxAttemptsPerWorker: read.int(
        'max_attempts_per_worker',
        WARM_POOL_DEFAULTS.maxAttemptsPerWorker,
        1,
      ),
      maxWorkerLifetimeMs: read.positiveDurationMs(
        'max_worker_lifetime',
        WARM_POOL_DEFAULTS.maxWorkerLifetimeMs,
        '5m',
      ),
      idleTtlMs: read.positiveDurationMs('worker_idle_ttl', WARM_POOL_DEFAULTS.idleTtlMs, '5m'),
      attemptUids: read.boolean('attempt_uids', true),
    };
    const key = `${pool.tenant}\u0000${pool.serviceAccount}\u0000${pool.image}`;
    const dup = seen.get(key);
    if (!read.ok) ok = false;
    if (ok && dup !== undefined) {
      problem(
        at,
        `${at} has the same tenant, service_account and image as ${base}[${dup}]; merge them`,
      );
      ok = false;
    }
    seen.set(key, n);
    if (ok) out.push(pool);
  });
  return out;
}
