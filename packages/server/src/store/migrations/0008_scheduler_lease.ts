import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0008SchedulerLease(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // Pro's scheduler leadership (docs/pro.md, "Scheduler leadership"): one row per lease.
      // epoch grows by one on every acquisition and fences the holder's writes; the times are
      // epoch ms read from the database's own clock, never a replica's. Created on SQLite
      // too, so both dialects keep one schema; Lite's sole scheduler never reads it.
      await db.schema
        .createTable('scheduler_lease')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('holder', 'text', (c) => c.notNull())
        .addColumn('epoch', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('renewed_at', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}
