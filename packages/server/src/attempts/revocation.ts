import {
  ACTIVE_STATES,
  isActive,
  type Clock,
  LivenessError,
  type SecretLivenessMode,
} from '@leoflow/core';
import type { AttemptCredentialStore } from '../store/ports/attempt-credentials.js';
import type { AttemptRecordStore } from '../store/ports/attempt-records.js';
import type { RunStore } from '../store/ports/runs.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type { TaskInstanceRow } from '../store/types.js';

/**
 * The executor that holds a claim, by the name recorded on it (null: the default executor).
 * The executors' registry (executor/executors.ts) is one; revocation asks nothing else of it.
 */
export interface ClaimOwners {
  owner(
    name: string | null,
  ): { terminate(taskInstanceId: string, tryNumber: number): Promise<void> } | undefined;
}

export interface RevocationDeps {
  store: AttemptCredentialStore &
    TaskInstanceStore &
    Pick<RunStore, 'getRunById'> &
    Pick<AttemptRecordStore, 'getAttemptRecord'>;
  clock: Clock;
  /** the attempt's own executor (recorded on its claim) is asked to stop it */
  executors: ClaimOwners;
  /** drops cached verifications of the attempt's tokens so the next call re-checks */
  evictAttempt: (taskInstanceId: string, tryNumber: number) => void;
  /** the liveness mode in force, so the answer can say what a revocation adds to it */
  livenessMode?: SecretLivenessMode;
  /**
   * The per-attempt token's lifetime (ms): bounds the token of an attempt that was dispatched
   * but never registered, whose record holds no expiry yet.
   */
  tokenTtlMs?: number;
}

/** Which attempt: the task instance as its tenant's scope found it, and optionally a try. */
export interface RevocationRequest {
  taskInstance: TaskInstanceRow;
  /** default: the instance's current try */
  tryNumber?: number;
  terminate: boolean;
}

/** What a revocation did, exactly (docs/credentials.md, "Revocation"). */
export interface RevocationResult {
  task_instance_id: string;
  try_number: number;
  /** the try's state when revoked (a superseded try's is the one it ended in) */
  attempt_state: string;
  /** whether the try was still the task instance's live one (queued or running) */
  live: boolean;
  /** true when the try was the task instance's current one, false when a later try superseded it */
  current: boolean;
  /** false when its credential had already been revoked: then nothing changed */
  revoked_now: boolean;
  /** when it was revoked (now, or earlier when it already was) */
  revoked_at: string;
  /** the newest token's exp; null when unknown */
  credential_expires_at: string | null;
  /** whether a token of the attempt still verified (signature, exp) when revoked */
  tokens_still_valid: boolean;
  /** what changed, one sentence each */
  changes: string[];
  terminated: boolean;
}

export const ATTEMPT_NOT_FOUND_CODE = 'LF_ATTEMPT_NOT_FOUND';

/**
 * Revokes an attempt's credential, whatever its state: a live attempt's token stops resolving
 * secrets and renewing at once (it keeps running unless `terminate`: its next heartbeat then
 * answers should_terminate and the executor is asked to stop it); a finished or superseded
 * attempt's token, which may still verify until its exp, resolves no secret in any liveness mode.
 * The answer says what changed: whether a token still verified, and until when. A try that was
 * never dispatched (no token was ever minted for it) is LF_ATTEMPT_NOT_FOUND, and nothing is
 * written.
 */
export async function revokeAttemptCredential(
  deps: RevocationDeps,
  input: RevocationRequest,
): Promise<RevocationResult> {
  const ti = input.taskInstance;
  const tryNumber = input.tryNumber ?? ti.try_number;
  const attempt = await findAttempt(deps, ti, tryNumber);
  const now = deps.clock.now();
  const run = await deps.store.getRunById(ti.dag_run_id);
  const record = await deps.store.getAttemptRecord(ti.id, tryNumber);
  const exp =
    record?.credential_exp ??
    (attempt.queuedAt !== null && deps.tokenTtlMs !== undefined
      ? attempt.queuedAt + deps.tokenTtlMs
      : null);
  const stillValid = exp === null ? attempt.live : exp > now;

  if (attempt.current) await deps.store.revokeAttemptCredential(ti.id, tryNumber, now);
  const revokedNow = await deps.store.revokeAttemptRecord(
    {
      tenant_id: ti.tenant_id,
      task_instance_id: ti.id,
      try_number: tryNumber,
      dag_id: ti.dag_id,
      dag_run_id: ti.dag_run_id,
      run_id: run?.run_id ?? ti.dag_run_id,
      task_id: ti.task_id,
    },
    now,
  );
  deps.evictAttempt(ti.id, tryNumber);
  const revokedAt = revokedNow ? now : (record?.credential_revoked_at ?? now);

  let terminated = false;
  if (input.terminate && attempt.live) {
    await deps.store.updateTaskInstance(
      ti.id,
      { states: ACTIVE_STATES, try_number: tryNumber },
      { terminate_requested: true },
      now,
    );
    await deps.executors.owner(ti.executor)?.terminate(ti.id, tryNumber);
    terminated = true;
  }

  const until = exp === null ? 'its expiry' : new Date(exp).toISOString();
  const changes: string[] = [];
  if (!revokedNow) {
    changes.push(
      `Nothing changed: its credential was already revoked at ${new Date(revokedAt).toISOString()}.`,
    );
  } else if (attempt.live) {
    changes.push(
      `Its token (valid until ${until}) resolves no secret from now on and is never renewed again.`,
    );
    changes.push(
      terminated
        ? 'The attempt is told to stop at its next heartbeat, and its executor is asked to stop it.'
        : 'The attempt keeps running: its heartbeats and final report still land past its exp.',
    );
  } else if (stillValid) {
    changes.push(
      `Its token still verified (until ${until}); it now resolves no secret in any liveness mode` +
        (deps.livenessMode === 'enforce'
          ? ' (under secret_liveness_mode=enforce it already resolved none: the attempt is not live)'
          : ' (under secret_liveness_mode=observe it still did)') +
        ` and is never renewed. Its spec and upstream XCom stay readable to its own agent, with its session key, until ${until}.`,
    );
  } else {
    changes.push(
      `Its newest token expired at ${until}: no token of it verifies any more; the revocation is recorded.`,
    );
  }
  if (input.terminate && !attempt.live) {
    changes.push(`Nothing to stop: the attempt is ${attempt.state}.`);
  }
  return {
    task_instance_id: ti.id,
    try_number: tryNumber,
    attempt_state: attempt.state,
    live: attempt.live,
    current: attempt.current,
    revoked_now: revokedNow,
    revoked_at: new Date(revokedAt).toISOString(),
    credential_expires_at: exp === null ? null : new Date(exp).toISOString(),
    tokens_still_valid: stillValid,
    changes,
    terminated,
  };
}

interface Attempt {
  current: boolean;
  live: boolean;
  state: string;
  /** when its (latest) dispatch was queued; null when unknown */
  queuedAt: number | null;
}

/** The try, when a token was ever minted for it; LF_ATTEMPT_NOT_FOUND otherwise. */
async function findAttempt(
  deps: RevocationDeps,
  ti: TaskInstanceRow,
  tryNumber: number,
): Promise<Attempt> {
  const notFound = (why: string) =>
    new LivenessError(
      ATTEMPT_NOT_FOUND_CODE,
      `${ti.task_id} has no try ${tryNumber}${why}; name a try it ran (leoflow tasks delivery <run> ${ti.task_id} lists them) or omit --try for the current one`,
    );
  if (!Number.isInteger(tryNumber) || tryNumber < 1 || tryNumber > ti.try_number) {
    throw notFound(` (its current try is ${ti.try_number})`);
  }
  if (tryNumber === ti.try_number) {
    // A try is an attempt once it was claimed: its token is minted at dispatch.
    if (ti.queued_at === null && !isActive(ti.state)) {
      throw notFound(` yet: it was never dispatched (the task instance is ${ti.state})`);
    }
    return {
      current: true,
      live: isActive(ti.state),
      state: ti.state,
      queuedAt: ti.queued_at,
    };
  }
  const history = await deps.store.listTaskInstanceHistory(ti.dag_run_id, ti.task_id);
  const past = history.find((h) => h.try_number === tryNumber);
  if (!past) throw notFound(' on record');
  return { current: false, live: false, state: past.state, queuedAt: null };
}
