import type { SecretGrants } from '@leoflow/core';
import type { SecretGrantKind, SecretGrantStore } from '../ports/secret-grants.js';
import { chunks, IN_CHUNK, unique } from './chunks.js';
import { changed, grantsOf } from './columns.js';
import { KyselySeam } from './seam.js';

/** Secret grants on Kysely: the dag_grants column of variables and connections. */
export class KyselySecretGrantStore extends KyselySeam implements SecretGrantStore {
  async getSecretGrants(
    tenant_id: string,
    kind: SecretGrantKind,
    names: readonly string[],
  ): Promise<Map<string, SecretGrants>> {
    const out = new Map<string, SecretGrants>();
    for (const part of chunks(unique(names), IN_CHUNK)) {
      const rows =
        kind === 'variables'
          ? await this.db
              .selectFrom('variables')
              .select(['key as name', 'dag_grants'])
              .where('tenant_id', '=', tenant_id)
              .where('key', 'in', part)
              .execute()
          : await this.db
              .selectFrom('connections')
              .select(['conn_id as name', 'dag_grants'])
              .where('tenant_id', '=', tenant_id)
              .where('conn_id', 'in', part)
              .execute();
      for (const r of rows) out.set(r.name, grantsOf(r.dag_grants));
    }
    return out;
  }

  async setSecretGrants(
    tenant_id: string,
    kind: SecretGrantKind,
    name: string,
    grants: SecretGrants,
    now: number,
  ): Promise<boolean> {
    const dag_grants = grants === null ? null : JSON.stringify(grants);
    const res =
      kind === 'variables'
        ? await this.db
            .updateTable('variables')
            .set({ dag_grants, updated_at: now })
            .where('tenant_id', '=', tenant_id)
            .where('key', '=', name)
            .executeTakeFirst()
        : await this.db
            .updateTable('connections')
            .set({ dag_grants, updated_at: now })
            .where('tenant_id', '=', tenant_id)
            .where('conn_id', '=', name)
            .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }
}
