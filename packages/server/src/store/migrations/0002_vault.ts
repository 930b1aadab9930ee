import { sql, type Migration } from 'kysely';
import type { Db, DialectTypes } from './dialect.js';

export function migration0002Vault({
  boolType,
  falseValue,
  blobType,
  boolCheck,
  dialect,
}: DialectTypes): Migration {
  return {
    async up(db: Db): Promise<void> {
      // The checks make "a secret stored in the clear" and "ciphertext without the id of the
      // key that sealed it" unrepresentable, whatever code writes the row.
      const isTrue = (column: string) =>
        dialect === 'postgres' ? sql`${sql.ref(column)}` : sql`${sql.ref(column)} = 1`;
      const isFalse = (column: string) =>
        dialect === 'postgres' ? sql`not ${sql.ref(column)}` : sql`${sql.ref(column)} = 0`;

      let variables = db.schema
        .createTable('variables')
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('value_text', 'text')
        .addColumn('value_cipher', blobType)
        .addColumn('key_id', 'text')
        .addColumn('is_secret', boolType, (c) => c.notNull().defaultTo(falseValue))
        .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('variables_pk', ['tenant_id', 'key'])
        .addForeignKeyConstraint('variables_tenant_fk', ['tenant_id'], 'tenants', ['id'])
        .addCheckConstraint(
          'variables_sealed_iff_secret',
          sql`(${isTrue('is_secret')} and value_text is null and value_cipher is not null and key_id is not null)
             or (${isFalse('is_secret')} and value_text is not null and value_cipher is null and key_id is null)`,
        );
      const secretCheck = boolCheck('is_secret');
      if (secretCheck) {
        variables = variables.addCheckConstraint('variables_is_secret_bool', secretCheck);
      }
      await variables.execute();
      await db.schema
        .createIndex('variables_key_id_idx')
        .on('variables')
        .column('key_id')
        .execute();

      await db.schema
        .createTable('connections')
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('conn_id', 'text', (c) => c.notNull())
        .addColumn('conn_type', 'text', (c) => c.notNull())
        .addColumn('host', 'text')
        .addColumn('login', 'text')
        .addColumn('schema', 'text')
        .addColumn('port', 'integer')
        .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('secret_cipher', blobType)
        .addColumn('key_id', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('connections_pk', ['tenant_id', 'conn_id'])
        .addForeignKeyConstraint('connections_tenant_fk', ['tenant_id'], 'tenants', ['id'])
        .addCheckConstraint(
          'connections_cipher_has_key_id',
          sql`(secret_cipher is null) = (key_id is null)`,
        )
        .execute();
      await db.schema
        .createIndex('connections_key_id_idx')
        .on('connections')
        .column('key_id')
        .execute();

      // No foreign key to tenants: an audit write must never fail because of what it
      // records, and the trail has to outlive anything it talks about.
      await db.schema
        .createTable('audit_log')
        .addColumn('id', dialect === 'postgres' ? 'bigserial' : 'integer', (c) =>
          dialect === 'postgres' ? c.primaryKey() : c.primaryKey().autoIncrement(),
        )
        .addColumn('tenant_id', 'text', (c) => c.notNull())
        .addColumn('at', 'bigint', (c) => c.notNull())
        .addColumn('actor', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('resource_type', 'text', (c) => c.notNull())
        .addColumn('resource_id', 'text', (c) => c.notNull())
        .addColumn('request_id', 'text')
        .addColumn('payload_json', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('audit_log_tenant_at_idx')
        .on('audit_log')
        .columns(['tenant_id', 'at'])
        .execute();
      await db.schema
        .createIndex('audit_log_tenant_action_idx')
        .on('audit_log')
        .columns(['tenant_id', 'action'])
        .execute();

      // Revoked iff equal to the row's try_number: retry and clear bump the try, so the new
      // attempt starts un-revoked without anyone having to remember to reset the column.
      await db.schema
        .alterTable('task_instances')
        .addColumn('credential_revoked_try', 'integer')
        .execute();
    },
  };
}
