import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0009UiSessions(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // Web app sessions (docs/ui.md), so a restart does not sign browsers out. The key is
      // the SHA-256 of the cookie value, never the value; the API token behind a session is
      // named by its jti (the token itself is never stored), and re-checked on every request.
      await db.schema
        .createTable('ui_sessions')
        .addColumn('id_hash', 'text', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('token_jti', 'text', (c) => c.notNull())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('ui_sessions_expires_idx')
        .on('ui_sessions')
        .column('expires_at')
        .execute();
    },
  };
}
