import type { Insertable, Selectable } from 'kysely';
import type { ConnectionsTable } from '../db-types.js';
import type { ConnectionStore } from '../ports/connections.js';
import type { Page } from '../types.js';
import type { ConnectionRecord } from '../vault-types.js';
import { chunks, unique, IN_CHUNK } from './chunks.js';
import { changed, grantsOf, num, toBuffer } from './columns.js';
import { KyselySeam } from './seam.js';

/**
 * Connections on Kysely. On SQLite the by-id read (the secret path's) goes through the hot-read
 * connection when there is one.
 */
export class KyselyConnectionStore extends KyselySeam implements ConnectionStore {
  async putConnection(rec: ConnectionRecord): Promise<void> {
    const row: Insertable<ConnectionsTable> = {
      tenant_id: rec.tenant_id,
      conn_id: rec.conn_id,
      conn_type: rec.conn_type,
      host: rec.host,
      login: rec.login,
      schema: rec.schema,
      port: rec.port,
      description: rec.description,
      secret_cipher: rec.secret_cipher === null ? null : toBuffer(rec.secret_cipher),
      key_id: rec.key_id,
      created_at: rec.created_at,
      updated_at: rec.updated_at,
    };
    await this.db
      .insertInto('connections')
      .values(row)
      .onConflict((oc) =>
        oc.columns(['tenant_id', 'conn_id']).doUpdateSet((eb) => ({
          conn_type: eb.ref('excluded.conn_type'),
          host: eb.ref('excluded.host'),
          login: eb.ref('excluded.login'),
          schema: eb.ref('excluded.schema'),
          port: eb.ref('excluded.port'),
          description: eb.ref('excluded.description'),
          secret_cipher: eb.ref('excluded.secret_cipher'),
          key_id: eb.ref('excluded.key_id'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .execute();
  }

  async getConnection(tenant_id: string, conn_id: string): Promise<ConnectionRecord | undefined> {
    const row = await this.db
      .selectFrom('connections')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('conn_id', '=', conn_id)
      .executeTakeFirst();
    return row && toConnectionRecord(row);
  }

  async listConnections(tenant_id: string, page: Page): Promise<ConnectionRecord[]> {
    const rows = await this.db
      .selectFrom('connections')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('conn_id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(toConnectionRecord);
  }

  async getConnectionsByIds(
    tenant_id: string,
    ids: readonly string[],
  ): Promise<ConnectionRecord[]> {
    const out: ConnectionRecord[] = [];
    for (const part of chunks(unique(ids), IN_CHUNK)) {
      if (this.hot !== undefined) {
        out.push(...this.hot.connectionsByIds(tenant_id, part));
        continue;
      }
      const rows = await this.db
        .selectFrom('connections')
        .selectAll()
        .where('tenant_id', '=', tenant_id)
        .where('conn_id', 'in', part)
        .orderBy('conn_id')
        .execute();
      out.push(...rows.map(toConnectionRecord));
    }
    return out;
  }

  async getAllConnections(tenant_id: string): Promise<ConnectionRecord[]> {
    const rows = await this.db
      .selectFrom('connections')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('conn_id')
      .execute();
    return rows.map(toConnectionRecord);
  }

  async countConnections(tenant_id: string): Promise<number> {
    const row = await this.db
      .selectFrom('connections')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenant_id)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async deleteConnection(tenant_id: string, conn_id: string): Promise<boolean> {
    const res = await this.db
      .deleteFrom('connections')
      .where('tenant_id', '=', tenant_id)
      .where('conn_id', '=', conn_id)
      .executeTakeFirst();
    return changed(res.numDeletedRows);
  }

  async existingConnectionIds(tenant_id: string, ids: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const part of chunks(unique(ids), IN_CHUNK)) {
      const rows = await this.db
        .selectFrom('connections')
        .select('conn_id')
        .where('tenant_id', '=', tenant_id)
        .where('conn_id', 'in', part)
        .execute();
      for (const r of rows) found.add(r.conn_id);
    }
    return found;
  }
}

function toConnectionRecord(r: Selectable<ConnectionsTable>): ConnectionRecord {
  return {
    tenant_id: r.tenant_id,
    conn_id: r.conn_id,
    conn_type: r.conn_type,
    host: r.host,
    login: r.login,
    schema: r.schema,
    port: r.port,
    description: r.description,
    secret_cipher: r.secret_cipher === null ? null : new Uint8Array(r.secret_cipher),
    key_id: r.key_id,
    dag_grants: grantsOf(r.dag_grants),
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
  };
}
