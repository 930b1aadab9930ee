import type { WarmPoolConfig } from '../../src/config/warm-pool-config.js';

/** The pool the warm-pool tests share: tenant acme's `etl` service account on one image. */
export const ACME_POOL: WarmPoolConfig = {
  tenant: 'acme',
  namespace: 'acme-tasks',
  serviceAccount: 'etl',
  image: 'leoflow/agent:1',
  minIdle: 2,
  maxSize: 3,
  maxAttemptsPerWorker: 2,
  maxWorkerLifetimeMs: 3_600_000,
  idleTtlMs: 300_000,
};
