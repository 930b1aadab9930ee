import { sql, type RawBuilder, type SqlBool } from 'kysely';
import type { StoreDialect } from '../migrations.js';
import type { LeaderFence } from '../ports/leader-fence.js';

/**
 * The database's clock in epoch ms. clock_timestamp(), not now(): now() is frozen at the start
 * of the transaction, and a fence checked late in a transaction must see the time it is
 * checked at.
 */
export const DB_NOW_MS = sql<number>`(extract(epoch from clock_timestamp()) * 1000)::bigint`;

/**
 * The condition a fenced write puts in its own WHERE (or checks first in its transaction): the
 * lease still carries the fence's epoch and has not expired by the database's clock. FOR SHARE
 * locks the lease row until the write commits, so a takeover (an UPDATE of that row) waits for
 * the write: a write that passed the check never commits after another epoch has begun.
 * Undefined for Lite's sole fence, where there is nothing to check.
 */
export function leaderFenceHolds(
  dialect: StoreDialect,
  fence: LeaderFence | undefined,
): RawBuilder<SqlBool> | undefined {
  if (fence === undefined || fence.kind === 'sole') return undefined;
  if (dialect !== 'postgres') {
    // A programming error, not an operator's: Lite builds SoleLeadership, never a lease.
    throw new Error('a scheduler lease fence needs PostgreSQL; Lite uses the sole fence');
  }
  return sql<SqlBool>`exists (select 1 from scheduler_lease where name = ${fence.name} and epoch = ${fence.epoch} and expires_at > ${DB_NOW_MS} for share)`;
}
