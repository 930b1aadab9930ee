import type { Kysely } from 'kysely';
import type { Database } from '../../store/db-types.js';
import { DB_NOW_MS } from '../../store/kysely/leader-fence.js';

/** A lease held: its epoch (the fence) and its expiry as the database sees it. */
export interface LeaseGrant {
  epoch: number;
  /** epoch ms on the database's clock; for logs, never compared with a local clock */
  expiresAtDbMs: number;
}

/**
 * The lease row's three operations. Every time is taken from the database's clock inside the
 * statement, so clock skew between replicas does not matter; a replica's own clock only
 * measures how long it may keep acting on a grant (lease-elector.ts).
 */
export interface LeaseStore {
  /**
   * Takes the lease when it has expired (or this holder has it already), bumping the epoch:
   * every acquisition is a new term. Undefined when another holder's lease is still live.
   */
  acquire(name: string, holder: string, ttlMs: number): Promise<LeaseGrant | undefined>;
  /**
   * Extends the lease only while this holder still has it with this epoch and it has not
   * expired; undefined otherwise (the term is over: acquire again).
   */
  renew(
    name: string,
    holder: string,
    epoch: number,
    ttlMs: number,
  ): Promise<LeaseGrant | undefined>;
  /** Expires the lease now if this holder still has it with this epoch, so another takes over at once. */
  release(name: string, holder: string, epoch: number): Promise<void>;
  /** Read-only: who holds the lease and for how much longer, by the database's clock. */
  current(name: string): Promise<LeaseHolder | undefined>;
}

/** The lease as the database sees it now (readiness probes and `leoflow doctor`). */
export interface LeaseHolder {
  holder: string;
  epoch: number;
  /** ms until the grant expires by the database's clock; ≤ 0 when it has expired */
  remainingMs: number;
}

/**
 * The lease on PostgreSQL through Kysely. Give it a handle whose pool is not the one busy API
 * requests queue on, or a renewal may wait behind them and the lease lapse for no reason.
 */
export class PostgresLeaseStore implements LeaseStore {
  constructor(private readonly db: Kysely<Database>) {}

  async acquire(name: string, holder: string, ttlMs: number): Promise<LeaseGrant | undefined> {
    const ttl = wholeMs(ttlMs);
    // One statement: the insert for the first acquisition ever, the conditional update for a
    // takeover. Two contenders serialise on the row; the loser's WHERE then sees a live lease.
    const row = await this.db
      .insertInto('scheduler_lease')
      .values({
        name,
        holder,
        epoch: 1,
        expires_at: (eb) => eb(DB_NOW_MS, '+', ttl),
        renewed_at: DB_NOW_MS,
      })
      .onConflict((oc) =>
        oc
          .column('name')
          .doUpdateSet((eb) => ({
            holder: eb.ref('excluded.holder'),
            epoch: eb('scheduler_lease.epoch', '+', 1),
            expires_at: eb.ref('excluded.expires_at'),
            renewed_at: eb.ref('excluded.renewed_at'),
          }))
          .where((eb) =>
            eb.or([
              eb('scheduler_lease.expires_at', '<=', DB_NOW_MS),
              eb('scheduler_lease.holder', '=', holder),
            ]),
          ),
      )
      .returning(['epoch', 'expires_at'])
      .executeTakeFirst();
    return row && { epoch: Number(row.epoch), expiresAtDbMs: Number(row.expires_at) };
  }

  async renew(
    name: string,
    holder: string,
    epoch: number,
    ttlMs: number,
  ): Promise<LeaseGrant | undefined> {
    const ttl = wholeMs(ttlMs);
    const row = await this.db
      .updateTable('scheduler_lease')
      .set((eb) => ({ expires_at: eb(DB_NOW_MS, '+', ttl), renewed_at: DB_NOW_MS }))
      .where('name', '=', name)
      .where('holder', '=', holder)
      .where('epoch', '=', epoch)
      .where('expires_at', '>', DB_NOW_MS)
      .returning(['epoch', 'expires_at'])
      .executeTakeFirst();
    return row && { epoch: Number(row.epoch), expiresAtDbMs: Number(row.expires_at) };
  }

  async release(name: string, holder: string, epoch: number): Promise<void> {
    await this.db
      .updateTable('scheduler_lease')
      .set({ expires_at: DB_NOW_MS })
      .where('name', '=', name)
      .where('holder', '=', holder)
      .where('epoch', '=', epoch)
      .execute();
  }

  async current(name: string): Promise<LeaseHolder | undefined> {
    const row = await this.db
      .selectFrom('scheduler_lease')
      .select((eb) => ['holder', 'epoch', eb(eb.ref('expires_at'), '-', DB_NOW_MS).as('remaining')])
      .where('name', '=', name)
      .executeTakeFirst();
    return (
      row && { holder: row.holder, epoch: Number(row.epoch), remainingMs: Number(row.remaining) }
    );
  }
}

function wholeMs(ms: number): number {
  return Math.max(1, Math.round(ms));
}
