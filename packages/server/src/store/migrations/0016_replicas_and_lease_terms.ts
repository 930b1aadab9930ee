import { sql, type Migration } from 'kysely';
import type { Db, DialectTypes } from './dialect.js';

export function migration0016ReplicasAndLeaseTerms({ dialect }: DialectTypes): Migration {
  return {
    async up(db: Db): Promise<void> {
      // Pro's history for operators and fault tests (docs/pro.md, "Faults"). Created on
      // SQLite too, so both dialects keep one schema; Lite writes neither.
      //
      // scheduler_lease_terms: one row per epoch of a lease, kept by a trigger on
      // scheduler_lease, in the same transaction as the acquire, renew or release that
      // changed it: a term cannot be granted without its row, nor its row lag its grant.
      await db.schema
        .createTable('scheduler_lease_terms')
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('epoch', 'bigint', (c) => c.notNull())
        .addColumn('holder', 'text', (c) => c.notNull())
        .addColumn('granted_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('scheduler_lease_terms_pk', ['name', 'epoch'])
        .execute();
      // Each replica's advertised agent URLs, to warn when replicas disagree.
      await db.schema
        .createTable('control_plane_replicas')
        .addColumn('instance', 'text', (c) => c.primaryKey())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('agent_urls', 'text', (c) => c.notNull())
        .addColumn('started_at', 'bigint', (c) => c.notNull())
        .addColumn('seen_at', 'bigint', (c) => c.notNull())
        .execute();
      if (dialect !== 'postgres') return;
      // granted_at is read when the row changes, after the acquire's WHERE saw the previous
      // term expired: a new term never starts before the last one's recorded expiry. The
      // function resolves names in the schema it was created in (search_path FROM CURRENT),
      // whatever the session's search_path.
      await sql`
      create function scheduler_lease_record_term() returns trigger
      language plpgsql set search_path from current as $$
      declare
        granted bigint := (extract(epoch from clock_timestamp()) * 1000)::bigint;
      begin
        if tg_op = 'INSERT' or new.epoch <> old.epoch then
          -- A holder re-acquiring its own live lease ends its old term here: every fenced
          -- write names its epoch, so the old one's writes are refused from this moment.
          if tg_op = 'UPDATE' then
            update scheduler_lease_terms set expires_at = least(expires_at, granted)
             where name = old.name and epoch = old.epoch;
          end if;
          insert into scheduler_lease_terms (name, epoch, holder, granted_at, expires_at)
          values (new.name, new.epoch, new.holder, granted, new.expires_at);
        else
          update scheduler_lease_terms set expires_at = new.expires_at
           where name = new.name and epoch = new.epoch;
        end if;
        return new;
      end $$`.execute(db);
      await sql`
      create trigger scheduler_lease_terms_trigger after insert or update on scheduler_lease
      for each row execute function scheduler_lease_record_term()`.execute(db);
    },
  };
}
