import type { Selectable } from 'kysely';
import type { Database } from '../db-types.js';
import type { AttemptRecordStore } from '../ports/attempt-records.js';
import type {
  AttemptRecordKey,
  AttemptRecordRow,
  AttemptSessionBinding,
  UndeclaredReads,
  UndeclaredUseSummary,
} from '../types.js';
import { changed, num, numOrNull } from './columns.js';
import { KyselySeam } from './seam.js';

/** Attempt records on Kysely. */
export class KyselyAttemptRecordStore extends KyselySeam implements AttemptRecordStore {
  async ensureAttemptRecord(
    key: AttemptRecordKey,
    now: number,
    credential_exp: number,
  ): Promise<void> {
    await this.db
      .insertInto('attempt_records')
      .values({ ...key, credential_exp, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['task_instance_id', 'try_number']).doNothing())
      .execute();
  }

  async bindAttemptSession(
    task_instance_id: string,
    try_number: number,
    session_hash: string,
    now: number,
    agent_masks_secrets = false,
  ): Promise<AttemptSessionBinding> {
    const res = await this.db
      .updateTable('attempt_records')
      .set({
        session_hash,
        agent_masks_secrets: agent_masks_secrets ? 1 : 0,
        registered_at: now,
        updated_at: now,
      })
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .where('session_hash', 'is', null)
      .executeTakeFirst();
    if (changed(res.numUpdatedRows)) return 'bound';
    const row = await this.db
      .selectFrom('attempt_records')
      .select('session_hash')
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .executeTakeFirst();
    return row?.session_hash === session_hash ? 'same' : 'conflict';
  }

  async getAttemptSession(
    task_instance_id: string,
    try_number: number,
  ): Promise<{ session_hash: string; agent_masks_secrets: boolean } | null> {
    const row = await this.db
      .selectFrom('attempt_records')
      .select(['session_hash', 'agent_masks_secrets'])
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .executeTakeFirst();
    if (row?.session_hash == null) return null;
    return {
      session_hash: row.session_hash,
      agent_masks_secrets: Number(row.agent_masks_secrets ?? 0) === 1,
    };
  }

  async bindExchangedPod(
    key: AttemptRecordKey,
    dispatch_gen: number,
    pod_uid: string,
    now: number,
    credential_exp: number,
  ): Promise<'bound' | 'taken'> {
    await this.ensureAttemptRecord(key, now, credential_exp);
    // One conditional UPDATE: of two replicas racing for the same attempt only one changes it.
    const res = await this.db
      .updateTable('attempt_records')
      .set({ exchanged_pod_uid: pod_uid, exchanged_dispatch_gen: dispatch_gen, updated_at: now })
      .where('task_instance_id', '=', key.task_instance_id)
      .where('try_number', '=', key.try_number)
      .where((eb) =>
        eb.or([
          eb('exchanged_pod_uid', 'is', null),
          eb('exchanged_dispatch_gen', '<', dispatch_gen),
        ]),
      )
      .executeTakeFirst();
    return changed(res.numUpdatedRows) ? 'bound' : 'taken';
  }

  async getAttemptRecord(
    task_instance_id: string,
    try_number: number,
  ): Promise<AttemptRecordRow | undefined> {
    const row = await this.#withPendingRenewals()
      .where('attempt_records.task_instance_id', '=', task_instance_id)
      .where('attempt_records.try_number', '=', try_number)
      .executeTakeFirst();
    return row ? attemptRecordRow(row) : undefined;
  }

  async listAttemptRecords(dag_run_id: string, task_id?: string): Promise<AttemptRecordRow[]> {
    let q = this.#withPendingRenewals().where('attempt_records.dag_run_id', '=', dag_run_id);
    if (task_id !== undefined) q = q.where('attempt_records.task_id', '=', task_id);
    const rows = await q
      .orderBy('attempt_records.task_id')
      .orderBy('attempt_records.try_number')
      .execute();
    return rows.map(attemptRecordRow);
  }

  /**
   * Attempt records with the renewals their try's task-instance row holds (only while that try
   * is the row's current one; a try bump folds them into the record).
   */
  #withPendingRenewals() {
    return this.db
      .selectFrom('attempt_records')
      .leftJoin('task_instances as ti', (j) =>
        j
          .onRef('ti.id', '=', 'attempt_records.task_instance_id')
          .onRef('ti.try_number', '=', 'attempt_records.try_number'),
      )
      .selectAll('attempt_records')
      .select([
        'ti.renewal_count as pending_renewals',
        'ti.renewed_at as pending_renewed_at',
        'ti.renewed_credential_exp as pending_credential_exp',
      ]);
  }

  async noteAttemptDelivery(
    task_instance_id: string,
    try_number: number,
    kind: 'variables' | 'connections',
    outcome: { names: string[] } | { refusal: string },
    modes: { scoping: string; liveness: string },
    now: number,
  ): Promise<void> {
    const base = { scoping_mode: modes.scoping, liveness_mode: modes.liveness, updated_at: now };
    const patch =
      'names' in outcome
        ? kind === 'variables'
          ? { ...base, variables_delivered: JSON.stringify([...outcome.names].sort()) }
          : { ...base, connections_delivered: JSON.stringify([...outcome.names].sort()) }
        : kind === 'variables'
          ? { ...base, variables_refusal: outcome.refusal }
          : { ...base, connections_refusal: outcome.refusal };
    await this.db
      .updateTable('attempt_records')
      .set(patch)
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .execute();
  }

  async noteRenewalStopped(
    task_instance_id: string,
    try_number: number,
    reason: string,
    now: number,
  ): Promise<void> {
    // The first stop reason is kept (a ceiling stop followed by beats is still "ceiling").
    await this.db
      .updateTable('attempt_records')
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .set({ renewal_stopped: reason, updated_at: now })
      .where('renewal_stopped', 'is', null)
      .execute();
  }

  async noteUndeclaredReads(
    task_instance_id: string,
    try_number: number,
    reads: UndeclaredReads,
    now: number,
  ): Promise<boolean> {
    const res = await this.db
      .updateTable('attempt_records')
      .set({ undeclared_reads: JSON.stringify(reads), updated_at: now })
      .where('task_instance_id', '=', task_instance_id)
      .where('try_number', '=', try_number)
      .where('undeclared_reads', 'is', null)
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async summarizeUndeclaredUse(
    tenant_id: string,
    dag_id?: string,
  ): Promise<UndeclaredUseSummary[]> {
    let q = this.db
      .selectFrom('attempt_records')
      .select(['dag_id', 'undeclared_reads', 'updated_at'])
      .where('tenant_id', '=', tenant_id)
      .where('undeclared_reads', 'is not', null);
    if (dag_id !== undefined) q = q.where('dag_id', '=', dag_id);
    const rows = await q.execute();
    const by = new Map<string, { v: Set<string>; c: Set<string>; n: number; last: number }>();
    for (const r of rows) {
      const reads = JSON.parse(r.undeclared_reads ?? '{}') as Partial<UndeclaredReads>;
      let e = by.get(r.dag_id);
      if (!e) by.set(r.dag_id, (e = { v: new Set(), c: new Set(), n: 0, last: 0 }));
      for (const n of reads.variables ?? []) e.v.add(n);
      for (const n of reads.connections ?? []) e.c.add(n);
      e.n++;
      e.last = Math.max(e.last, num(r.updated_at));
    }
    return [...by.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([dag, e]) => ({
        dag_id: dag,
        variables: [...e.v].sort(),
        connections: [...e.c].sort(),
        attempts: e.n,
        last_seen: e.last,
      }));
  }
}

/** pg hands back int8 as numbers via the pool's type parsers; this also guards stray strings. */
interface PendingRenewals {
  pending_renewals: number | string | bigint | null;
  pending_renewed_at: number | string | bigint | null;
  pending_credential_exp: number | string | bigint | null;
}

function attemptRecordRow(
  r: Selectable<Database['attempt_records']> & PendingRenewals,
): AttemptRecordRow {
  const names = (v: string | null): string[] | null =>
    v === null ? null : (JSON.parse(v) as string[]);
  const pending = r.pending_renewals === null ? 0 : num(r.pending_renewals);
  const renewedAt = pending > 0 ? numOrNull(r.pending_renewed_at) : null;
  return {
    task_instance_id: r.task_instance_id,
    try_number: num(r.try_number),
    tenant_id: r.tenant_id,
    dag_id: r.dag_id,
    dag_run_id: r.dag_run_id,
    run_id: r.run_id,
    task_id: r.task_id,
    map_index: Number(r.map_index ?? -1),
    session_hash: r.session_hash,
    registered_at: numOrNull(r.registered_at),
    scoping_mode: r.scoping_mode,
    liveness_mode: r.liveness_mode,
    variables_delivered: names(r.variables_delivered),
    connections_delivered: names(r.connections_delivered),
    variables_refusal: r.variables_refusal,
    connections_refusal: r.connections_refusal,
    renewals: num(r.renewals) + pending,
    last_renewed_at: renewedAt ?? numOrNull(r.last_renewed_at),
    renewal_stopped: r.renewal_stopped,
    credential_exp: pending > 0 ? numOrNull(r.pending_credential_exp) : numOrNull(r.credential_exp),
    undeclared_reads:
      r.undeclared_reads === null ? null : (JSON.parse(r.undeclared_reads) as UndeclaredReads),
    credential_revoked_at: numOrNull(r.credential_revoked_at),
    created_at: num(r.created_at),
    updated_at: Math.max(num(r.updated_at), renewedAt ?? 0),
  };
}
