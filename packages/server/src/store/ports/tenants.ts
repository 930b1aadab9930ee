import type { Page, TenantRow } from '../types.js';

/** Tenants: the top of every row's ownership. */
export interface TenantStore {
  ensureTenant(tenant_id: string, name: string, now: number): Promise<void>;
  /** false when a tenant with that id already exists */
  createTenant(tenant: TenantRow): Promise<boolean>;
  getTenant(tenant_id: string): Promise<TenantRow | undefined>;
  listTenants(page: Page): Promise<TenantRow[]>;
}
