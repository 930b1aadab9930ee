import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0014SecretMasking(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // Whether the attempt's agent masks delivered secrets in its output (issue 34): 1 when
      // its Register said so, 0 otherwise; the control plane masks on write for the rest.
      await db.schema
        .alterTable('attempt_records')
        .addColumn('agent_masks_secrets', 'integer')
        .execute();
    },
  };
}
