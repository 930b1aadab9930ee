import type { Selectable } from 'kysely';
import type { UiSessionsTable } from '../db-types.js';
import type { UiSessionStore } from '../ports/ui-sessions.js';
import type { UiSessionRow } from '../types.js';
import { changed, num } from './columns.js';
import { KyselySeam } from './seam.js';

/** Web app sessions on Kysely. */
export class KyselyUiSessionStore extends KyselySeam implements UiSessionStore {
  async insertUiSession(row: UiSessionRow): Promise<void> {
    await this.db.insertInto('ui_sessions').values(row).execute();
  }

  async getUiSession(id_hash: string): Promise<UiSessionRow | undefined> {
    const row = await this.db
      .selectFrom('ui_sessions')
      .selectAll()
      .where('id_hash', '=', id_hash)
      .executeTakeFirst();
    return row ? uiSessionRow(row) : undefined;
  }

  async deleteUiSession(id_hash: string): Promise<boolean> {
    const res = await this.db
      .deleteFrom('ui_sessions')
      .where('id_hash', '=', id_hash)
      .executeTakeFirst();
    return changed(res.numDeletedRows);
  }

  async deleteExpiredUiSessions(now: number): Promise<number> {
    const res = await this.db
      .deleteFrom('ui_sessions')
      .where('expires_at', '<=', now)
      .executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}

function uiSessionRow(r: Selectable<UiSessionsTable>): UiSessionRow {
  return { ...r, created_at: num(r.created_at), expires_at: num(r.expires_at) };
}
