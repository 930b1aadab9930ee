import type { TaskInstancePatch } from './ports/task-instances.js';

/**
 * The runtime fields of a try, as they are before it is first queued: no queue, start or end
 * time, no heartbeat, no host or process, no executor holding it, no stop asked for. Every path that starts a task
 * instance's next try afresh writes exactly these (retry, clear, a new row); what else it
 * sets — state, retry_at, the outcome, max_tries — is the caller's.
 */
export const TASK_INSTANCE_RESET = {
  queued_at: null,
  started_at: null,
  ended_at: null,
  last_heartbeat_at: null,
  hostname: null,
  pid: null,
  // the next try's claim records its own; until then no executor is asked about this row
  executor: null,
  terminate_requested: false,
} as const satisfies TaskInstancePatch;
