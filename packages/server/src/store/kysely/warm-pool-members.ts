import type { Selectable } from 'kysely';
import type { WarmPoolMembersTable } from '../db-types.js';
import type { WarmPoolMemberStore } from '../ports/warm-pool-members.js';
import type { WarmPoolMemberRow, WarmPoolRecycleReason } from '../types.js';
import { changed, fromBool, num, numOrNull } from './columns.js';
import { KyselySeam } from './seam.js';

/** Warm-pool members on Kysely: every write one conditional UPDATE by pod uid. */
export class KyselyWarmPoolMemberStore extends KyselySeam implements WarmPoolMemberStore {
  async insertWarmPoolMember(
    row: Pick<
      WarmPoolMemberRow,
      'pod_uid' | 'pool_key' | 'namespace' | 'pod_name' | 'tenant_id' | 'created_at'
    >,
  ): Promise<void> {
    await this.db
      .insertInto('warm_pool_members')
      .values({
        ...row,
        bootstrapped: this.bool(false),
        attempts: 0,
        busy: this.bool(false),
        idle_since: row.created_at,
        recycled: null,
        recycled_at: null,
      })
      .execute();
  }

  async getWarmPoolMember(pod_uid: string): Promise<WarmPoolMemberRow | undefined> {
    const row = await this.db
      .selectFrom('warm_pool_members')
      .selectAll()
      .where('pod_uid', '=', pod_uid)
      .executeTakeFirst();
    return row ? memberRow(row) : undefined;
  }

  async listServingWarmPoolMembers(pool_key: string): Promise<WarmPoolMemberRow[]> {
    const rows = await this.db
      .selectFrom('warm_pool_members')
      .selectAll()
      .where('pool_key', '=', pool_key)
      .where('recycled', 'is', null)
      .orderBy('created_at')
      .orderBy('pod_uid')
      .execute();
    return rows.map(memberRow);
  }

  async markWarmPoolMemberBootstrapped(
    pod_uid: string,
    expect: Pick<WarmPoolMemberRow, 'pool_key' | 'namespace' | 'pod_name'>,
  ): Promise<boolean> {
    const res = await this.db
      .updateTable('warm_pool_members')
      .set({ bootstrapped: this.bool(true) })
      .where('pod_uid', '=', pod_uid)
      .where('pool_key', '=', expect.pool_key)
      .where('namespace', '=', expect.namespace)
      .where('pod_name', '=', expect.pod_name)
      .where('bootstrapped', '=', this.bool(false))
      .where('recycled', 'is', null)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async startWarmPoolAttempt(pod_uid: string): Promise<boolean> {
    const res = await this.db
      .updateTable('warm_pool_members')
      .set((eb) => ({ busy: this.bool(true), attempts: eb('attempts', '+', 1) }))
      .where('pod_uid', '=', pod_uid)
      .where('recycled', 'is', null)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async finishWarmPoolAttempt(
    pod_uid: string,
    now: number,
  ): Promise<WarmPoolMemberRow | undefined> {
    const res = await this.db
      .updateTable('warm_pool_members')
      .set({ busy: this.bool(false), idle_since: now })
      .where('pod_uid', '=', pod_uid)
      .where('recycled', 'is', null)
      .executeTakeFirst();
    if (!changed(res.numUpdatedRows)) return undefined;
    const row = await this.getWarmPoolMember(pod_uid);
    return row?.recycled === null ? row : undefined;
  }

  async recycleWarmPoolMember(
    pod_uid: string,
    reason: WarmPoolRecycleReason,
    now: number,
  ): Promise<boolean> {
    const res = await this.db
      .updateTable('warm_pool_members')
      .set({ recycled: reason, recycled_at: now })
      .where('pod_uid', '=', pod_uid)
      .where('recycled', 'is', null)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async pruneRecycledWarmPoolMembers(before: number): Promise<number> {
    const res = await this.db
      .deleteFrom('warm_pool_members')
      .where('recycled', 'is not', null)
      .where('recycled_at', '<=', before)
      .executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}

function memberRow(r: Selectable<WarmPoolMembersTable>): WarmPoolMemberRow {
  return {
    ...r,
    created_at: num(r.created_at),
    bootstrapped: fromBool(r.bootstrapped),
    attempts: num(r.attempts),
    busy: fromBool(r.busy),
    idle_since: num(r.idle_since),
    recycled_at: numOrNull(r.recycled_at),
  };
}
