import { isActive, LeoflowError, type Clock } from '@leoflow/core';
import type { Executor } from '../executor/executor.js';
import type { Store } from '../store/store.js';

export interface RevocationDeps {
  store: Store;
  clock: Clock;
  executor: Executor;
  /** drops cached verifications of the attempt's tokens so the next call re-checks */
  evictAttempt: (taskInstanceId: string, tryNumber: number) => void;
}

/**
 * Stops a live attempt's credential from resolving secrets and from renewing, at once. The
 * attempt keeps running unless `terminate` is set (its next heartbeat then answers
 * should_terminate and the executor is asked to stop the agent).
 */
export async function revokeAttemptCredential(
  deps: RevocationDeps,
  input: {
    tenantId: string;
    dagId: string;
    runId: string;
    taskId: string;
    tryNumber?: number;
    terminate: boolean;
  },
): Promise<{ task_instance_id: string; try_number: number; terminated: boolean }> {
  const run = await deps.store.getRun(input.tenantId, input.dagId, input.runId);
  if (!run)
    throw new LeoflowError('LF_RUN_NOT_FOUND', `DAG ${input.dagId} has no run "${input.runId}"`);
  const ti = await deps.store.getTaskInstance(run.id, input.taskId);
  if (!ti)
    throw new LeoflowError('LF_TASK_NOT_FOUND', `run ${input.runId} has no task "${input.taskId}"`);
  const tryNumber = input.tryNumber ?? ti.try_number;
  if (tryNumber !== ti.try_number || !isActive(ti.state)) {
    // A finished or superseded attempt's credential is already dead (liveness); nothing to do.
    throw new LeoflowError(
      'LF_ATTEMPT_NOT_LIVE',
      `try ${tryNumber} of ${input.taskId} is not live (the task instance is ${ti.state}, try ${ti.try_number}); its credential already resolves nothing`,
    );
  }
  const now = deps.clock.now();
  await deps.store.revokeAttemptCredential(ti.id, tryNumber, now);
  deps.evictAttempt(ti.id, tryNumber);
  if (input.terminate) {
    await deps.store.updateTaskInstance(
      ti.id,
      { states: ['queued', 'running'], try_number: tryNumber },
      { terminate_requested: true },
      now,
    );
    await deps.executor.terminate(ti.id, tryNumber);
  }
  return { task_instance_id: ti.id, try_number: tryNumber, terminated: input.terminate };
}
