import type { ServerConfig } from '../../config/server-config.js';
import type { KyselyStore } from '../../store/kysely-store.js';
import { openStore } from '../../store/open-store.js';
import { PostgresLeaseStore, type LeaseStore } from './lease-store.js';

/**
 * The scheduler lease on its own two-connection pool: a renewal must never queue behind busy
 * API requests on the main pool, or the lease lapses while the leader is healthy.
 */
export async function openLeaseStore(
  database: ServerConfig['database'],
  /** a renewal with no answer gives up after this long, so the next attempt is not delayed */
  queryTimeoutMs: number,
): Promise<{ leases: LeaseStore; close(): Promise<void> }> {
  if (database.kind !== 'postgres') {
    throw new Error('the scheduler lease needs PostgreSQL; Lite uses SoleLeadership');
  }
  const store = (await openStore({ ...database, poolSize: 2, queryTimeoutMs })) as KyselyStore;
  return { leases: new PostgresLeaseStore(store.kysely), close: () => store.close() };
}
