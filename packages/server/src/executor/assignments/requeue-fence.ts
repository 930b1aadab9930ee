import type { Clock } from '@leoflow/core';
import type { TaskInstanceStore } from '../../store/ports/task-instances.js';
import type { Refence } from './assignment-broker.js';

/**
 * The store's side of a requeued assignment: the queued row moves to the next dispatch
 * generation, conditional on still being queued at the old one. Every agent RPC fences on the
 * generation its token carries (Register's queued → running write, Ack, GetVariables /
 * GetConnections through the liveness check), so the token minted for the assignment that was
 * not acked stops working the moment this lands, long before its exp.
 */
export function requeueFence(
  store: Pick<TaskInstanceStore, 'updateTaskInstance'>,
  clock: Clock,
): Refence {
  return async (id) => {
    const next = id.dispatch_gen + 1;
    const moved = await store.updateTaskInstance(
      id.task_instance_id,
      { states: ['queued'], try_number: id.try_number, dispatch_gen: id.dispatch_gen },
      { dispatch_gen: next },
      clock.now(),
    );
    return moved ? next : null;
  };
}
