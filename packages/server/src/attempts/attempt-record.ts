import type { Clock, SecretKind } from '@leoflow/core';
import type { Logger } from 'pino';
import type { AgentTokenClaims } from '../auth/agent-token.js';
import type { AttemptRecordStore } from '../store/ports/attempt-records.js';

/**
 * The per-try delivery record: scoping and liveness modes in force, the names delivered (never
 * values), refusals, renewals and the credential's newest expiry. Every write here is best-effort (a
 * failed write is logged, never changes an RPC's answer). The session binding at Register is
 * not here: it is authoritative (session-binding.ts).
 */
export class AttemptRecorder {
  constructor(
    private readonly store: AttemptRecordStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly modes: { scoping: string; liveness: string },
  ) {}

  private readonly stopped = new Set<string>();

  /**
   * (try, kind) → the delivered names this replica last wrote: an agent that fetches the same
   * set again (a retry, a task reading its secrets more than once) would rewrite the same row
   * with the same names, an UPDATE through the store on the secret path for nothing (issue 38).
   */
  private readonly recorded = new Map<string, string>();

  async delivered(claims: AgentTokenClaims, kind: SecretKind, names: string[]): Promise<void> {
    const key = `${claims.task_instance_id}\u0000${claims.try_number}\u0000${kind}`;
    const value = JSON.stringify([...names].sort());
    if (this.recorded.get(key) === value) return;
    const written = await this.best('delivery', claims, (now) =>
      this.store.noteAttemptDelivery(
        claims.task_instance_id,
        claims.try_number,
        kind,
        { names },
        this.modes,
        now,
      ),
    );
    if (!written) return;
    if (this.recorded.size >= 10_000) this.recorded.clear();
    this.recorded.set(key, value);
  }

  async refused(claims: AgentTokenClaims, kind: SecretKind, reason: string): Promise<void> {
    await this.best('refusal', claims, (now) =>
      this.store.noteAttemptDelivery(
        claims.task_instance_id,
        claims.try_number,
        kind,
        { refusal: reason },
        this.modes,
        now,
      ),
    );
  }

  // A renewal is recorded by the heartbeat's own UPDATE of the task-instance row
  // (Store.recordHeartbeat, migration 0007), not here: one statement on the hot path, not two.

  async renewalStopped(
    claims: AgentTokenClaims,
    reason: 'ceiling' | 'revoked' | 'expired',
  ): Promise<void> {
    // Every later beat of a stopped attempt would repeat a no-op UPDATE: remember it instead.
    const key = `${claims.task_instance_id}\u0000${claims.try_number}`;
    if (this.stopped.has(key)) return;
    if (this.stopped.size >= 10_000) this.stopped.clear();
    this.stopped.add(key);
    await this.best('renewal stop', claims, (now) =>
      this.store.noteRenewalStopped(claims.task_instance_id, claims.try_number, reason, now),
    );
  }

  /**
   * One UPDATE on the hot path (the row is created at Register; an attempt that never
   * registered — e.g. one dispatched before an upgrade — simply goes unrecorded).
   */
  private async best(
    what: string,
    claims: AgentTokenClaims,
    write: (now: number) => Promise<void>,
  ): Promise<boolean> {
    try {
      await write(this.clock.now());
      return true;
    } catch (err) {
      this.logger.warn({ err, try: claims.try_number }, `attempt record (${what}) not written`);
      return false;
    }
  }
}
