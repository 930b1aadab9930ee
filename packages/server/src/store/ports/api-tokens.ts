import type { ApiTokenRow, Page } from '../types.js';

/** Minted user API tokens, by jti (the token itself is never stored). */
export interface ApiTokenStore {
  /** Records a minted user token (by jti; the token itself is never stored). */
  insertApiToken(row: ApiTokenRow): Promise<void>;
  /** Across tenants: authentication looks a verified token's jti up before trusting its tenant. */
  getApiToken(jti: string): Promise<ApiTokenRow | undefined>;
  listApiTokens(
    tenant_id: string,
    filter: { include_revoked?: boolean; name?: string },
    page: Page,
  ): Promise<ApiTokenRow[]>;
  /** Marks the tenant's token revoked; false when there is no such unrevoked token. */
  revokeApiToken(tenant_id: string, jti: string, by: string, now: number): Promise<boolean>;
}
