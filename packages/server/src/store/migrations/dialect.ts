import type { Kysely } from 'kysely';
import { sql } from 'kysely';

export type StoreDialect = 'sqlite' | 'postgres';

// Migrations are typed against Kysely<any> on purpose: each one must keep compiling against
// the schema as it was when it was written, not against today's Database interface.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above: Kysely's advice for migrations
export type Db = Kysely<any>;

/** What differs between the dialects in a table definition. */
export function dialectTypes(dialect: StoreDialect) {
  // SQLite has no boolean type and binds no JS booleans; PostgreSQL gets a real BOOLEAN so
  // that people reading the database directly see true/false.
  const boolType = dialect === 'postgres' ? 'boolean' : 'integer';
  const falseValue = dialect === 'postgres' ? false : 0;
  const trueValue = dialect === 'postgres' ? true : 1;
  const blobType = dialect === 'postgres' ? 'bytea' : 'blob';

  const boolCheck = (column: string) =>
    dialect === 'sqlite' ? sql`${sql.ref(column)} in (0, 1)` : undefined;

  return { dialect, boolType, falseValue, trueValue, blobType, boolCheck } as const;
}

export type DialectTypes = ReturnType<typeof dialectTypes>;
