import type { Selectable } from 'kysely';
import type { ApiTokensTable } from '../db-types.js';
import type { ApiTokenStore } from '../ports/api-tokens.js';
import type { ApiTokenRow, Page } from '../types.js';
import { num } from './columns.js';
import { KyselySeam } from './seam.js';

/** API token records on Kysely. */
export class KyselyApiTokenStore extends KyselySeam implements ApiTokenStore {
  async insertApiToken(row: ApiTokenRow): Promise<void> {
    await this.db.insertInto('api_tokens').values(row).execute();
  }

  async getApiToken(jti: string): Promise<ApiTokenRow | undefined> {
    const row = await this.db
      .selectFrom('api_tokens')
      .selectAll()
      .where('jti', '=', jti)
      .executeTakeFirst();
    return row ? apiTokenRow(row) : undefined;
  }

  async listApiTokens(
    tenant_id: string,
    filter: { include_revoked?: boolean; name?: string },
    page: Page,
  ): Promise<ApiTokenRow[]> {
    let q = this.db.selectFrom('api_tokens').selectAll().where('tenant_id', '=', tenant_id);
    if (!filter.include_revoked) q = q.where('revoked_at', 'is', null);
    if (filter.name !== undefined) q = q.where('name', '=', filter.name);
    const rows = await q
      .orderBy('created_at', 'desc')
      .orderBy('jti')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(apiTokenRow);
  }

  async revokeApiToken(tenant_id: string, jti: string, by: string, now: number): Promise<boolean> {
    const res = await this.db
      .updateTable('api_tokens')
      .set({ revoked_at: now, revoked_by: by })
      .where('tenant_id', '=', tenant_id)
      .where('jti', '=', jti)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }
}

function apiTokenRow(r: Selectable<ApiTokensTable>): ApiTokenRow {
  return {
    jti: r.jti,
    tenant_id: r.tenant_id,
    name: r.name,
    role: r.role,
    created_by: r.created_by,
    created_at: num(r.created_at),
    expires_at: r.expires_at === null ? null : num(r.expires_at),
    revoked_at: r.revoked_at === null ? null : num(r.revoked_at),
    revoked_by: r.revoked_by,
  };
}
