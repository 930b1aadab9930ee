import { ACTIVE_STATES, isActive, type Clock, LivenessError } from '@leoflow/core';
import type { AttemptCredentialStore } from '../store/ports/attempt-credentials.js';
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
  store: AttemptCredentialStore & TaskInstanceStore;
  clock: Clock;
  /** the attempt's own executor (recorded on its claim) is asked to stop it */
  executors: ClaimOwners;
  /** drops cached verifications of the attempt's tokens so the next call re-checks */
  evictAttempt: (taskInstanceId: string, tryNumber: number) => void;
}

/** Which attempt: the task instance as its tenant's scope found it, and optionally a try. */
export interface RevocationRequest {
  taskInstance: TaskInstanceRow;
  /** default: the instance's current try */
  tryNumber?: number;
  terminate: boolean;
}

/**
 * Stops a live attempt's credential from resolving secrets and from renewing, at once. The
 * attempt keeps running unless `terminate` is set (its next heartbeat then answers
 * should_terminate and the executor is asked to stop the agent).
 */
export async function revokeAttemptCredential(
  deps: RevocationDeps,
  input: RevocationRequest,
): Promise<{ task_instance_id: string; try_number: number; terminated: boolean }> {
  const ti = input.taskInstance;
  const tryNumber = input.tryNumber ?? ti.try_number;
  if (tryNumber !== ti.try_number || !isActive(ti.state)) {
    // A finished or superseded attempt's credential is already dead (liveness); nothing to do.
    throw new LivenessError(
      'LF_ATTEMPT_NOT_LIVE',
      `try ${tryNumber} of ${ti.task_id} is not live (the task instance is ${ti.state}, try ${ti.try_number}); its credential already resolves nothing`,
    );
  }
  const now = deps.clock.now();
  await deps.store.revokeAttemptCredential(ti.id, tryNumber, now);
  deps.evictAttempt(ti.id, tryNumber);
  if (input.terminate) {
    await deps.store.updateTaskInstance(
      ti.id,
      { states: ACTIVE_STATES, try_number: tryNumber },
      { terminate_requested: true },
      now,
    );
    await deps.executors.owner(ti.executor)?.terminate(ti.id, tryNumber);
  }
  return { task_instance_id: ti.id, try_number: tryNumber, terminated: input.terminate };
}
