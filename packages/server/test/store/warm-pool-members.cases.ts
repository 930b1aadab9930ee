import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/index.js';

/** What the shared storage suite hands to the warm-pool member cases. */
export interface WarmPoolMemberCaseContext {
  store(): Store;
  /** a second store over the same database: another replica */
  open(): Promise<Store>;
  T0: number;
}

/**
 * Warm-pool members (migration 0010) on both dialects: the row round-trips, and every write is
 * a conditional UPDATE that two replicas racing on one pod settle in the database.
 */
export function registerWarmPoolMemberCases(ctx: WarmPoolMemberCaseContext): void {
  const { T0 } = ctx;
  const store = () => ctx.store();

  function member(pool_key = `wp-${randomUUID().slice(0, 8)}`) {
    const pod_uid = randomUUID();
    return {
      pod_uid,
      pool_key,
      namespace: 'acme-tasks',
      pod_name: `leoflow-worker-${pod_uid.slice(0, 8)}`,
      tenant_id: 'acme',
      created_at: T0,
    };
  }

  describe('warm-pool members', () => {
    it('round-trips a new member: serving, not bootstrapped, no attempts, idle since created', async () => {
      const m = member();
      await store().insertWarmPoolMember(m);
      expect(await store().getWarmPoolMember(m.pod_uid)).toEqual({
        ...m,
        bootstrapped: false,
        attempts: 0,
        busy: false,
        idle_since: T0,
        recycled: null,
        recycled_at: null,
      });
      expect(await store().getWarmPoolMember('no-such-uid')).toBeUndefined();
      expect((await store().listServingWarmPoolMembers(m.pool_key)).map((r) => r.pod_uid)).toEqual([
        m.pod_uid,
      ]);
    });

    it('bootstraps once: a second mark, another name, namespace or pool, or a recycled row → false', async () => {
      const m = member();
      await store().insertWarmPoolMember(m);
      const expect_ = { pool_key: m.pool_key, namespace: m.namespace, pod_name: m.pod_name };
      expect(
        await store().markWarmPoolMemberBootstrapped(m.pod_uid, { ...expect_, pod_name: 'x' }),
      ).toBe(false);
      expect(
        await store().markWarmPoolMemberBootstrapped(m.pod_uid, { ...expect_, namespace: 'x' }),
      ).toBe(false);
      expect(
        await store().markWarmPoolMemberBootstrapped(m.pod_uid, { ...expect_, pool_key: 'wp-x' }),
      ).toBe(false);
      expect(await store().markWarmPoolMemberBootstrapped(m.pod_uid, expect_)).toBe(true);
      expect(await store().markWarmPoolMemberBootstrapped(m.pod_uid, expect_)).toBe(false);
      expect((await store().getWarmPoolMember(m.pod_uid))?.bootstrapped).toBe(true);

      const r = member();
      await store().insertWarmPoolMember(r);
      expect(await store().recycleWarmPoolMember(r.pod_uid, 'survivor', T0 + 1)).toBe(true);
      expect(
        await store().markWarmPoolMemberBootstrapped(r.pod_uid, {
          pool_key: r.pool_key,
          namespace: r.namespace,
          pod_name: r.pod_name,
        }),
      ).toBe(false);
    });

    it('two replicas racing to bootstrap one pod: exactly one wins', async () => {
      const other = await ctx.open();
      try {
        for (let round = 0; round < 5; round++) {
          const m = member();
          await store().insertWarmPoolMember(m);
          const expect_ = { pool_key: m.pool_key, namespace: m.namespace, pod_name: m.pod_name };
          const results = await Promise.all([
            store().markWarmPoolMemberBootstrapped(m.pod_uid, expect_),
            other.markWarmPoolMemberBootstrapped(m.pod_uid, expect_),
            store().markWarmPoolMemberBootstrapped(m.pod_uid, expect_),
            other.markWarmPoolMemberBootstrapped(m.pod_uid, expect_),
          ]);
          expect(results.filter(Boolean)).toHaveLength(1);
        }
      } finally {
        await other.close();
      }
    });

    it('counts attempts and busy/idle on serving rows only; recycle writes the reason once', async () => {
      const m = member();
      await store().insertWarmPoolMember(m);
      expect(await store().startWarmPoolAttempt(m.pod_uid)).toBe(true);
      expect(await store().getWarmPoolMember(m.pod_uid)).toMatchObject({
        attempts: 1,
        busy: true,
        idle_since: T0,
      });
      expect(await store().finishWarmPoolAttempt(m.pod_uid, T0 + 500)).toMatchObject({
        attempts: 1,
        busy: false,
        idle_since: T0 + 500,
      });
      await store().startWarmPoolAttempt(m.pod_uid);
      expect((await store().getWarmPoolMember(m.pod_uid))?.attempts).toBe(2);

      const other = await ctx.open();
      try {
        const both = await Promise.all([
          store().recycleWarmPoolMember(m.pod_uid, 'attempts', T0 + 900),
          other.recycleWarmPoolMember(m.pod_uid, 'idle', T0 + 900),
        ]);
        expect(both.filter(Boolean)).toHaveLength(1);
        // what the other replica sees at once
        const seen = await other.getWarmPoolMember(m.pod_uid);
        expect(seen?.recycled).toBe(both[0] ? 'attempts' : 'idle');
        expect(seen?.recycled_at).toBe(T0 + 900);
      } finally {
        await other.close();
      }
      expect(await store().startWarmPoolAttempt(m.pod_uid)).toBe(false);
      expect(await store().finishWarmPoolAttempt(m.pod_uid, T0 + 1_000)).toBeUndefined();
      expect((await store().getWarmPoolMember(m.pod_uid))?.attempts).toBe(2);
      expect(await store().listServingWarmPoolMembers(m.pool_key)).toEqual([]);
      expect(await store().startWarmPoolAttempt('no-such-uid')).toBe(false);
      expect(await store().recycleWarmPoolMember('no-such-uid', 'gone', T0)).toBe(false);
    });

    it('lists a pool’s serving members only, oldest first, and prunes old recycled rows', async () => {
      const pool = `wp-${randomUUID().slice(0, 8)}`;
      const a = { ...member(pool), created_at: T0 + 2 };
      const b = { ...member(pool), created_at: T0 + 1 };
      const c = member(pool);
      const elsewhere = member();
      for (const m of [a, b, c, elsewhere]) await store().insertWarmPoolMember(m);
      // far past every other case's recycle times: the suite shares one database
      const at = T0 + 3_600_000_000;
      await store().recycleWarmPoolMember(c.pod_uid, 'gone', at);
      expect((await store().listServingWarmPoolMembers(pool)).map((r) => r.pod_uid)).toEqual([
        b.pod_uid,
        a.pod_uid,
      ]);
      await store().pruneRecycledWarmPoolMembers(at - 1);
      expect((await store().getWarmPoolMember(c.pod_uid))?.recycled).toBe('gone');
      expect(await store().pruneRecycledWarmPoolMembers(at)).toBeGreaterThanOrEqual(1);
      expect(await store().getWarmPoolMember(c.pod_uid)).toBeUndefined();
      expect(await store().getWarmPoolMember(a.pod_uid)).toBeDefined();
    });
  });
}
