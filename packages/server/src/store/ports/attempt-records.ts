import type {
  AttemptRecordKey,
  AttemptRecordRow,
  AttemptSessionBinding,
  UndeclaredReads,
  UndeclaredUseSummary,
} from '../types.js';

/**
 * One record per attempt (task instance + try): its session binding, what was delivered
 * or refused, credential renewals, and the undeclared reads it made (D5).
 */
export interface AttemptRecordStore {
  /**
   * Creates the attempt's record if it has none (idempotent): `credential_exp` (ms) is the exp of
   * the credential it registered with, kept when the record already exists.
   */
  ensureAttemptRecord(key: AttemptRecordKey, now: number, credential_exp: number): Promise<void>;
  /**
   * Binds the agent session (SHA-256 of its key) once: 'bound' the first time, 'same' when the
   * same hash is presented again, 'conflict' when another session is already bound.
   */
  bindAttemptSession(
    task_instance_id: string,
    try_number: number,
    session_hash: string,
    now: number,
    /** the registering agent masks delivered secrets in its output (recorded with the binding) */
    agent_masks_secrets?: boolean,
  ): Promise<AttemptSessionBinding>;
  /**
   * The token exchange's once-per-attempt rule, across replicas: binds the pod `pod_uid` of
   * dispatch `dispatch_gen` to the attempt's record (creating it, with `credential_exp`, if it has
   * none). 'bound' when no pod was bound yet, or only one of an earlier dispatch; 'taken' when a
   * pod of this dispatch or a later one already exchanged (the same pod again included).
   */
  bindExchangedPod(
    key: AttemptRecordKey,
    dispatch_gen: number,
    pod_uid: string,
    now: number,
    credential_exp: number,
  ): Promise<'bound' | 'taken'>;
  getAttemptRecord(
    task_instance_id: string,
    try_number: number,
  ): Promise<AttemptRecordRow | undefined>;
  /**
   * The session binding alone (SHA-256 hex of the agent's key, and whether that agent masks
   * secrets), read on every replica that has not seen the attempt yet: null when the attempt has
   * no record or registered no session.
   */
  getAttemptSession(
    task_instance_id: string,
    try_number: number,
  ): Promise<{ session_hash: string; agent_masks_secrets: boolean } | null>;
  listAttemptRecords(dag_run_id: string, task_id?: string): Promise<AttemptRecordRow[]>;
  /** A delivery (names, never values) or a refusal of one kind, with the modes in force. */
  noteAttemptDelivery(
    task_instance_id: string,
    try_number: number,
    kind: 'variables' | 'connections',
    outcome: { names: string[] } | { refusal: string },
    modes: { scoping: string; liveness: string },
    now: number,
  ): Promise<void>;
  /**
   * Renewal stopped (ceiling, revoked, expired); the first reason is kept. Renewals themselves
   * are recorded by the renewing heartbeat's own write (TaskInstanceStore.recordHeartbeat).
   */
  noteRenewalStopped(
    task_instance_id: string,
    try_number: number,
    reason: string,
    now: number,
  ): Promise<void>;
  /** D5: records the undeclared reads once per attempt; false when already recorded. */
  noteUndeclaredReads(
    task_instance_id: string,
    try_number: number,
    reads: UndeclaredReads,
    now: number,
  ): Promise<boolean>;
  /** D5 summary per DAG of one tenant (optionally one DAG), from the attempt records. */
  summarizeUndeclaredUse(tenant_id: string, dag_id?: string): Promise<UndeclaredUseSummary[]>;
}
