import type { Kysely } from 'kysely';
import type { Database } from '../db-types.js';
import { DB_NOW_MS } from './leader-fence.js';

/** A replica as the database has it: what it advertises to agents, and when it was last seen. */
export interface ReplicaRecord {
  instance: string;
  role: string;
  /** the advertised agent URLs, sorted (compared as a set) */
  agentUrls: string[];
  /** ms since it was last seen, on the database's clock */
  ageMs: number;
}

/**
 * The control_plane_replicas table (migration 0016): each Pro replica's row, written at start,
 * refreshed while it runs and removed when it stops. Every time is the database's clock, so
 * replicas' clocks (which may be skewed, or jump) never decide what is recent.
 */
export class ControlPlaneReplicas {
  constructor(private readonly db: Kysely<Database>) {}

  async register(r: {
    instance: string;
    role: string;
    agentUrls: readonly string[];
  }): Promise<void> {
    await this.db
      .insertInto('control_plane_replicas')
      .values({
        instance: r.instance,
        role: r.role,
        agent_urls: JSON.stringify([...r.agentUrls].sort()),
        started_at: DB_NOW_MS,
        seen_at: DB_NOW_MS,
      })
      .onConflict((oc) => oc.column('instance').doUpdateSet({ seen_at: DB_NOW_MS }))
      .execute();
  }

  async seen(instance: string): Promise<void> {
    await this.db
      .updateTable('control_plane_replicas')
      .set({ seen_at: DB_NOW_MS })
      .where('instance', '=', instance)
      .execute();
  }

  async remove(instance: string): Promise<void> {
    await this.db.deleteFrom('control_plane_replicas').where('instance', '=', instance).execute();
  }

  /** Every other replica seen within `withinMs`. */
  async others(instance: string, withinMs: number): Promise<ReplicaRecord[]> {
    const rows = await this.db
      .selectFrom('control_plane_replicas')
      .select((eb) => [
        'instance',
        'role',
        'agent_urls',
        eb(DB_NOW_MS, '-', eb.ref('seen_at')).as('age'),
      ])
      .where('instance', '<>', instance)
      .where((eb) => eb('seen_at', '>=', eb(DB_NOW_MS, '-', withinMs)))
      .orderBy('instance')
      .execute();
    return rows.map((r) => ({
      instance: r.instance,
      role: r.role,
      agentUrls: JSON.parse(r.agent_urls) as string[],
      ageMs: Number(r.age),
    }));
  }
}
