import type { Selectable } from 'kysely';
import type { RunnersTable } from '../db-types.js';
import type { RunnerIdentity, RunnerKind, RunnerRecord } from '../directory-types.js';
import type { RunnerStore } from '../ports/runners.js';
import type { Page } from '../types.js';
import { isUniqueViolation, num, toBuffer } from './columns.js';
import { KyselySeam } from './seam.js';

/** Runner records of the directory, on Kysely. */
export class KyselyRunnerStore extends KyselySeam implements RunnerStore {
  async insertRunner(row: RunnerRecord): Promise<boolean> {
    try {
      await this.db
        .insertInto('runners')
        .values({
          id: row.id,
          tenant_id: row.tenant_id,
          name: row.name,
          kind: row.kind,
          labels_json: JSON.stringify(row.labels),
          capacity: row.capacity,
          ssh_host: row.ssh?.host ?? null,
          ssh_port: row.ssh?.port ?? null,
          ssh_user: row.ssh?.user ?? null,
          ssh_credential: row.ssh?.credential ?? null,
          ssh_host_key: row.ssh?.host_key ?? null,
          token_hash: row.token_hash,
          token_cipher: row.token_cipher === null ? null : toBuffer(row.token_cipher),
          token_key_id: row.token_key_id,
          created_by: row.created_by,
          created_at: row.created_at,
        })
        .execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async getRunner(tenant_id: string, name: string): Promise<RunnerRecord | undefined> {
    const row = await this.db
      .selectFrom('runners')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .where('name', '=', name)
      .executeTakeFirst();
    return row ? runnerRecord(row) : undefined;
  }

  async listRunners(tenant_id: string, page: Page): Promise<RunnerRecord[]> {
    const rows = await this.db
      .selectFrom('runners')
      .selectAll()
      .where('tenant_id', '=', tenant_id)
      .orderBy('name')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(runnerRecord);
  }

  async deleteRunner(tenant_id: string, name: string): Promise<RunnerRecord | undefined> {
    return this.writeTx(async (tx) => {
      let q = tx
        .selectFrom('runners')
        .selectAll()
        .where('tenant_id', '=', tenant_id)
        .where('name', '=', name);
      if (this.dialect === 'postgres') q = q.forUpdate();
      const row = await q.executeTakeFirst();
      if (!row) return undefined;
      await tx.deleteFrom('runners').where('id', '=', row.id).execute();
      return runnerRecord(row);
    });
  }

  async runnerByTokenHash(token_hash: string): Promise<RunnerIdentity | undefined> {
    const row = await this.db
      .selectFrom('runners')
      .select(['id', 'tenant_id', 'name', 'kind'])
      .where('token_hash', '=', token_hash)
      .executeTakeFirst();
    if (!row) return undefined;
    return { id: row.id, tenant_id: row.tenant_id, name: row.name, kind: row.kind as RunnerKind };
  }

  async runnerById(id: string): Promise<RunnerIdentity | undefined> {
    const row = await this.db
      .selectFrom('runners')
      .select(['id', 'tenant_id', 'name', 'kind'])
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) return undefined;
    return { id: row.id, tenant_id: row.tenant_id, name: row.name, kind: row.kind as RunnerKind };
  }
}

function runnerRecord(r: Selectable<RunnersTable>): RunnerRecord {
  const ssh =
    r.kind === 'ssh' &&
    r.ssh_host !== null &&
    r.ssh_user !== null &&
    r.ssh_credential !== null &&
    r.ssh_host_key !== null
      ? {
          host: r.ssh_host,
          port: r.ssh_port ?? 22,
          user: r.ssh_user,
          credential: r.ssh_credential,
          host_key: r.ssh_host_key,
        }
      : null;
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    name: r.name,
    kind: r.kind as RunnerKind,
    labels: JSON.parse(r.labels_json) as Record<string, string>,
    capacity: r.capacity,
    ssh,
    token_hash: r.token_hash,
    token_cipher: r.token_cipher === null ? null : new Uint8Array(r.token_cipher),
    token_key_id: r.token_key_id,
    created_by: r.created_by,
    created_at: num(r.created_at),
  };
}
