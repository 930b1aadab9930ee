import type { Insertable, Selectable } from 'kysely';
import type { VariablesTable } from '../db-types.js';
import type { VariableStore } from '../ports/variables.js';
import type { Page } from '../types.js';
import type { VariableRecord } from '../vault-types.js';
import { chunks, unique, IN_CHUNK } from './chunks.js';
import { changed, fromBool, grantsOf, num, toBuffer } from './columns.js';
import { KyselySeam } from './seam.js';

/** Variables on Kysely. */
export class KyselyVariableStore extends KyselySeam implements VariableStore {
  async putVariable(rec: VariableRecord): Promise<void> {
    const row: Insertable<VariablesTable> = {
      tenant_id: rec.tenant_id,
      key: rec.key,
      value_text: rec.value_text,
      value_cipher: rec.value_cipher === null ? null : toBuffer(rec.value_cipher),
      key_id: rec.key_id,
      is_secret: this.bool(rec.is_secret),
      description: rec.description,
      created_at: rec.created_at,
      updated_at: rec.updated_at,
    };
    // An overwrite keeps the original created_at: the variable is the same one, re-set.
    await this.db
      .insertInto('variables')
      .values(row)
      .onConflict((oc) =>
        oc.columns(['tenant_id', 'key']).doUpdateSet((eb) => ({
          value_text: eb.ref('excluded.value_text'),
          value_cipher: eb.ref('excluded.value_cipher'),
          key_id: eb.ref('excluded.key_id'),
          is_secret: eb.ref('excluded.is_secret'),
          description: eb.ref('excluded.description'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .execute();
  }

  async getVariable(tenant_id: string, key: string): Promise<VariableRecord | undefined> {
    const row = await this.db
      .selectFrom('variables')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('key', '=', key)
      .executeTakeFirst();
    return row && toVariableRecord(row);
  }

  async listVariables(tenant_id: string, page: Page): Promise<VariableRecord[]> {
    const rows = await this.db
      .selectFrom('variables')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('key')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(toVariableRecord);
  }

  async getVariablesByKeys(tenant_id: string, keys: readonly string[]): Promise<VariableRecord[]> {
    const out: VariableRecord[] = [];
    for (const part of chunks(unique(keys), IN_CHUNK)) {
      const rows = await this.db
        .selectFrom('variables')
        .selectAll()
        .where('tenant_id', '=', tenant_id)
        .where('key', 'in', part)
        .orderBy('key')
        .execute();
      out.push(...rows.map(toVariableRecord));
    }
    return out;
  }

  async getAllVariables(tenant_id: string): Promise<VariableRecord[]> {
    const rows = await this.db
      .selectFrom('variables')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('key')
      .execute();
    return rows.map(toVariableRecord);
  }

  async countVariables(tenant_id: string): Promise<number> {
    const row = await this.db
      .selectFrom('variables')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenant_id)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async deleteVariable(tenant_id: string, key: string): Promise<boolean> {
    const res = await this.db
      .deleteFrom('variables')
      .where('tenant_id', '=', tenant_id)
      .where('key', '=', key)
      .executeTakeFirst();
    return changed(res.numDeletedRows);
  }

  async existingVariableKeys(tenant_id: string, keys: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const part of chunks(unique(keys), IN_CHUNK)) {
      const rows = await this.db
        .selectFrom('variables')
        .select('key')
        .where('tenant_id', '=', tenant_id)
        .where('key', 'in', part)
        .execute();
      for (const r of rows) found.add(r.key);
    }
    return found;
  }
}

function toVariableRecord(r: Selectable<VariablesTable>): VariableRecord {
  return {
    tenant_id: r.tenant_id,
    key: r.key,
    value_text: r.value_text,
    value_cipher: r.value_cipher === null ? null : new Uint8Array(r.value_cipher),
    key_id: r.key_id,
    is_secret: fromBool(r.is_secret),
    description: r.description,
    dag_grants: grantsOf(r.dag_grants),
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
  };
}
