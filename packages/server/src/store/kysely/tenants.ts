import type { TenantStore } from '../ports/tenants.js';
import type { Page, TenantRow } from '../types.js';
import { num } from './columns.js';
import { KyselySeam } from './seam.js';

/** Tenants on Kysely. */
export class KyselyTenantStore extends KyselySeam implements TenantStore {
  async ensureTenant(tenant_id: string, name: string, now: number): Promise<void> {
    await this.db
      .insertInto('tenants')
      .values({ id: tenant_id, name, created_at: now })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  }

  async createTenant(tenant: TenantRow): Promise<boolean> {
    const res = await this.db
      .insertInto('tenants')
      .values({ id: tenant.id, name: tenant.name, created_at: tenant.created_at })
      .onConflict((oc) => oc.column('id').doNothing())
      .executeTakeFirst();
    return Number(res.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async getTenant(tenant_id: string): Promise<TenantRow | undefined> {
    const row = await this.db
      .selectFrom('tenants')
      .selectAll()
      .where('id', '=', tenant_id)
      .executeTakeFirst();
    return row ? { id: row.id, name: row.name, created_at: num(row.created_at) } : undefined;
  }

  async listTenants(page: Page): Promise<TenantRow[]> {
    const rows = await this.db
      .selectFrom('tenants')
      .selectAll()
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map((r) => ({ id: r.id, name: r.name, created_at: num(r.created_at) }));
  }
}
