import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0003ApiTokens(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // One row per user API token ever minted, keyed by its jti: a token whose jti is not
      // here, or is revoked here, is refused even though its signature verifies. The token
      // itself is never stored (it is a bearer credential; the row is enough to refuse it).
      await db.schema
        .createTable('api_tokens')
        .addColumn('jti', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint')
        .addColumn('revoked_at', 'bigint')
        .addColumn('revoked_by', 'text')
        .execute();
      await db.schema
        .createIndex('api_tokens_tenant_idx')
        .on('api_tokens')
        .columns(['tenant_id', 'created_at'])
        .execute();
    },
  };
}
