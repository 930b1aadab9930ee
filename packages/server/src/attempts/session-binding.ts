import { hash } from 'node:crypto';
import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import type { AgentTokenClaims } from '../auth/agent-token.js';
import type { AttemptRecordStore } from '../store/ports/attempt-records.js';
import type { AuditStore } from '../store/ports/audit.js';
import type { AttemptRecordKey, AttemptSessionBinding } from '../store/types.js';

/**
 * A token works only for the agent that registered it (issue 34). Each agent process draws a
 * random session key; Register binds its SHA-256 to the attempt's record (the store, so every
 * replica reads the same binding), and every later attempt RPC — renewal included, before and
 * after exp — must carry that key in the `leoflow-session` header. A copy of the token alone
 * (from a pod spec, a log, a core dump) does nothing after Register, and a copy that registers
 * first makes the real agent's Register fail the attempt loudly (attempt-registration.ts).
 */

/** What a request's session key is to the attempt it claims. */
export type SessionVerdict =
  /** the key bound at Register */
  | 'bound'
  /** no key on the request */
  | 'no_key'
  /** a key, but not the bound one */
  | 'other_key'
  /** the attempt has not registered (no binding in the store yet) */
  | 'unregistered';

/** Why a use of an attempt's token was refused as unbound (the audit payload's `reason`). */
export type UnboundReason = Exclude<SessionVerdict, 'bound'> | 'second_registration';

export const UNBOUND_USE_AUDIT = 'credential.unbound_use';

export const CREDENTIAL_UNBOUND_CODE = 'LF_CREDENTIAL_UNBOUND';
export const CREDENTIAL_COPIED_CODE = 'LF_CREDENTIAL_COPIED';
export const SESSION_KEY_REQUIRED_CODE = 'LF_AGENT_SESSION_KEY_REQUIRED';

const WHAT: Record<Exclude<SessionVerdict, 'bound'>, string> = {
  no_key: 'this request carried no session key',
  other_key: 'this request carried another session key',
  unregistered: 'the attempt has not registered yet (Register binds the key first)',
};

/** The refusal's text: what happened and what to do (never the key, never the token). */
export function unboundMessage(verdict: Exclude<SessionVerdict, 'bound'>): string {
  return (
    `${CREDENTIAL_UNBOUND_CODE}: this attempt's credential works only with the session key of the ` +
    `agent that registered it, and ${WHAT[verdict]}. If this is the attempt's own agent, let the ` +
    'attempt fail and clear the task for a fresh one; otherwise the token was copied ' +
    '(audited as credential.unbound_use).'
  );
}

export function sessionHash(sessionKey: string): string {
  // one-shot: every attempt RPC checks its session key (same digest as createHash)
  return hash('sha256', sessionKey, 'hex');
}

export interface SessionBindingsDeps {
  store: Pick<
    AttemptRecordStore,
    'ensureAttemptRecord' | 'bindAttemptSession' | 'getAttemptSession'
  > &
    Pick<AuditStore, 'appendAudit'>;
  clock: Clock;
  logger: Logger;
  /** bindings remembered per replica (default 50,000); a binding never changes once made */
  cacheSize?: number;
}

/** How many refusals of one attempt, reason and RPC are audited per replica (then counted). */
const AUDITED_PER_KEY = 1;

/**
 * The binding of session keys to attempts, read from the store and remembered: a binding is
 * written once per (task instance, try) and never changes, so a replica that has seen it answers
 * from memory; one that has not (an agent that reconnected elsewhere) reads it once.
 */
export class SessionBindings {
  readonly #store: SessionBindingsDeps['store'];
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #cacheSize: number;
  /** (task instance, try) → the bound key's hash and whether its agent masks secrets */
  readonly #bound = new Map<string, { hash: string; masks: boolean }>();
  readonly #audited = new Map<string, number>();
  /** refusals seen (audited or not), for tests and metrics */
  refusals = 0;

  constructor(deps: SessionBindingsDeps) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
    this.#cacheSize = deps.cacheSize ?? 50_000;
  }

  /**
   * Register's binding: creates the attempt's record (keeping the first credential's exp) and
   * binds the key once. 'same' for the key already bound, 'conflict' for another. Authoritative:
   * a store failure throws (the Register fails and the agent retries).
   */
  async bind(
    claims: AgentTokenClaims,
    sessionKey: string,
    masksSecrets = false,
  ): Promise<AttemptSessionBinding> {
    if (sessionKey === '') throw new Error('an empty session key cannot be bound');
    const now = this.#clock.now();
    await this.#store.ensureAttemptRecord(keyOf(claims), now, claims.exp * 1000);
    const hash = sessionHash(sessionKey);
    const outcome = await this.#store.bindAttemptSession(
      claims.task_instance_id,
      claims.try_number,
      hash,
      now,
      masksSecrets,
    );
    // 'same' (a retried Register) keeps what the first one recorded: read it back once
    if (outcome === 'bound') this.#remember(attemptKey(claims), { hash, masks: masksSecrets });
    return outcome;
  }

  /**
   * Whether the agent bound to the attempt masks delivered secrets in its output (known once a
   * check or a bind on this replica saw the binding; undefined otherwise — treat as "no").
   */
  agentMasks(claims: AgentTokenClaims): boolean | undefined {
    return this.#bound.get(attemptKey(claims))?.masks;
  }

  /**
   * Is `sessionKey` the one bound to the claims' attempt? Throws when the store cannot say (the
   * caller answers Unavailable: neither a grant nor a refusal).
   */
  async check(claims: AgentTokenClaims, sessionKey: string): Promise<SessionVerdict> {
    const key = attemptKey(claims);
    let bound = this.#bound.get(key);
    if (bound === undefined) {
      const stored = await this.#store.getAttemptSession(
        claims.task_instance_id,
        claims.try_number,
      );
      if (stored === null) return 'unregistered';
      bound = { hash: stored.session_hash, masks: stored.agent_masks_secrets };
      this.#remember(key, bound);
    }
    if (sessionKey === '') return 'no_key';
    return sessionHash(sessionKey) === bound.hash ? 'bound' : 'other_key';
  }

  /**
   * Audits a refused use (credential.unbound_use: the attempt, the RPC and why — never a key or
   * a token), once per attempt, reason and RPC on this replica; best-effort.
   */
  async refused(claims: AgentTokenClaims, rpc: string, reason: UnboundReason): Promise<void> {
    this.refusals++;
    const key = `${attemptKey(claims)}\u0000${reason}\u0000${rpc}`;
    const seen = this.#audited.get(key) ?? 0;
    if (this.#audited.size >= 10_000) this.#audited.clear();
    this.#audited.set(key, seen + 1);
    if (seen >= AUDITED_PER_KEY) return;
    this.#logger.warn(
      {
        code: reason === 'second_registration' ? CREDENTIAL_COPIED_CODE : CREDENTIAL_UNBOUND_CODE,
        task_instance_id: claims.task_instance_id,
        try_number: claims.try_number,
        rpc,
        reason,
      },
      "an attempt's token was used without its agent's session key",
    );
    try {
      await this.#store.appendAudit({
        tenant_id: claims.tenant_id,
        at: this.#clock.now(),
        actor: `agent:${claims.task_instance_id}#${claims.try_number}`,
        action: UNBOUND_USE_AUDIT,
        resource_type: 'dag',
        resource_id: claims.dag_id,
        request_id: null,
        payload: {
          rpc,
          reason,
          run_id: claims.run_id,
          task_id: claims.task_id,
          try_number: claims.try_number,
        },
      });
    } catch (err) {
      this.#logger.warn({ err }, 'audit write failed (credential.unbound_use)');
    }
  }

  #remember(key: string, binding: { hash: string; masks: boolean }): void {
    if (this.#bound.size >= this.#cacheSize) {
      // Oldest first (Map keeps insertion order): an evicted binding is read again on need.
      const oldest = this.#bound.keys().next();
      if (!oldest.done) this.#bound.delete(oldest.value);
    }
    this.#bound.set(key, binding);
  }
}

function attemptKey(c: AgentTokenClaims): string {
  return `${c.task_instance_id}\u0000${c.try_number}`;
}

function keyOf(c: AgentTokenClaims): AttemptRecordKey {
  return {
    tenant_id: c.tenant_id,
    task_instance_id: c.task_instance_id,
    try_number: c.try_number,
    dag_id: c.dag_id,
    dag_run_id: c.dag_run_id,
    run_id: c.run_id,
    task_id: c.task_id,
    ...(c.map_index >= 0 ? { map_index: c.map_index } : {}),
  };
}
