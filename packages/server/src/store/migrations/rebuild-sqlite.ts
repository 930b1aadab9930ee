import { sql } from 'kysely';
import type { Db } from './dialect.js';

/**
 * Rebuilds a SQLite table under a new definition: `create` makes it under a scratch name, every
 * row is copied by the columns both have (new columns take their defaults), the old table is
 * dropped and the new one renamed into place. Indexes are the caller's to recreate.
 */
export async function rebuildSqlite(
  db: Db,
  table: string,
  create: (name: string) => Promise<unknown>,
): Promise<void> {
  const scratch = `${table}__rebuild`;
  await create(scratch);
  const cols = (name: string) =>
    sql<{ name: string }>`select name from pragma_table_info(${name})`.execute(db);
  const before = new Set((await cols(table)).rows.map((r) => r.name));
  const shared = (await cols(scratch)).rows.map((r) => r.name).filter((n) => before.has(n));
  const list = sql.join(shared.map((n) => sql.ref(n)));
  await sql`insert into ${sql.table(scratch)} (${list}) select ${list} from ${sql.table(table)}`.execute(
    db,
  );
  await sql`drop table ${sql.table(table)}`.execute(db);
  await sql`alter table ${sql.table(scratch)} rename to ${sql.table(table)}`.execute(db);
}
