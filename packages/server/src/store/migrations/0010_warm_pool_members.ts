import { sql, type Migration } from 'kysely';
import type { Db, DialectTypes } from './dialect.js';

export function migration0010WarmPoolMembers({
  boolType,
  falseValue,
  boolCheck,
}: DialectTypes): Migration {
  return {
    async up(db: Db): Promise<void> {
      // Warm-pool members (docs/kubernetes.md, "Warm pools"), so every replica answers a
      // worker's exchange and RPCs alike and a failover keeps the pool's pods. Keyed by the
      // pod uid: the apiserver never reuses one, and the worker token names it. `recycled` is
      // written before the pod is deleted and never cleared; the row is pruned later. The
      // worker token itself is never stored (nor anything the pod bootstraps with).
      let members = db.schema
        .createTable('warm_pool_members')
        .addColumn('pod_uid', 'text', (c) => c.primaryKey())
        .addColumn('pool_key', 'text', (c) => c.notNull())
        .addColumn('namespace', 'text', (c) => c.notNull())
        .addColumn('pod_name', 'text', (c) => c.notNull())
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('bootstrapped', boolType, (c) => c.notNull().defaultTo(falseValue))
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('busy', boolType, (c) => c.notNull().defaultTo(falseValue))
        .addColumn('idle_since', 'bigint', (c) => c.notNull())
        .addColumn('recycled', 'text')
        .addColumn('recycled_at', 'bigint')
        .addCheckConstraint(
          'warm_pool_members_recycled_at',
          sql`(recycled is null) = (recycled_at is null)`,
        );
      for (const column of ['bootstrapped', 'busy']) {
        const check = boolCheck(column);
        if (check) members = members.addCheckConstraint(`warm_pool_members_${column}_bool`, check);
      }
      await members.execute();
      await db.schema
        .createIndex('warm_pool_members_pool_idx')
        .on('warm_pool_members')
        .columns(['pool_key', 'recycled'])
        .execute();
    },
  };
}
