import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0004DispatchGeneration(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // Which dispatch of the current try holds the live credential. A claim (scheduled →
      // queued) bumps it and stamps it into the agent token; an orphaned claim reset to
      // scheduled keeps its try, so this — not the try — is what fences the old credential.
      await db.schema
        .alterTable('task_instances')
        .addColumn('dispatch_gen', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
    },
  };
}
