import type { Kysely, Migration, MigrationProvider } from 'kysely';
import { sql } from 'kysely';
import type { StoreDialect } from './migrations.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- as in migrations.ts: each migration compiles against the schema of its day
type Db = Kysely<any>;

/**
 * The directory's own ordered migration list, with its own bookkeeping tables
 * (DIRECTORY_MIGRATION_TABLE), apart from a cell's: Lite applies it to the same SQLite file,
 * Pro to a PostgreSQL schema of its own, so no cell's schema ever holds a runner's token hash.
 * Never rename or edit a released entry; append.
 */
export function directoryMigrations(dialect: StoreDialect): Record<string, Migration> {
  const blobType = dialect === 'postgres' ? 'bytea' : 'blob';
  return {
    '0001_runners_cells_placements': {
      async up(db: Db): Promise<void> {
        // No foreign key to tenants: in Pro the tenants table lives in each cell, not here.
        await db.schema
          .createTable('runners')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('tenant_id', 'text', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('labels_json', 'text', (c) => c.notNull())
          .addColumn('capacity', 'integer', (c) => c.notNull())
          .addColumn('ssh_host', 'text')
          .addColumn('ssh_port', 'integer')
          .addColumn('ssh_user', 'text')
          .addColumn('ssh_credential', 'text')
          .addColumn('ssh_host_key', 'text')
          .addColumn('token_hash', 'text', (c) => c.unique())
          .addColumn('token_cipher', blobType)
          .addColumn('token_key_id', 'text')
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addUniqueConstraint('runners_tenant_name_uq', ['tenant_id', 'name'])
          .addCheckConstraint(
            'runners_kind_token',
            // an inbound runner always has a token (minted in the same insert); ssh never
            sql`(kind = 'inbound' and token_hash is not null and token_cipher is not null) or (kind = 'ssh' and token_hash is null and token_cipher is null)`,
          )
          .execute();
        await db.schema
          .createTable('cells')
          .addColumn('name', 'text', (c) => c.primaryKey())
          .addColumn('url', 'text', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('tenant_placements')
          .addColumn('tenant_id', 'text', (c) => c.primaryKey())
          .addColumn('cell', 'text', (c) => c.notNull().references('cells.name'))
          .addColumn('placed_by', 'text', (c) => c.notNull())
          .addColumn('placed_at', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
  };
}

export function directoryMigrationProvider(dialect: StoreDialect): MigrationProvider {
  return { getMigrations: () => Promise.resolve(directoryMigrations(dialect)) };
}
