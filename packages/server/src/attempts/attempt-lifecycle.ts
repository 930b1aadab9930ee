import {
  ACTIVE_STATES,
  afterFailure,
  isActive,
  type BranchDecision,
  type Clock,
} from '@leoflow/core';
import type { Logger } from 'pino';
import type { AttemptIdentity } from '../auth/agent-token.js';
import type { LeaderFence } from '../store/ports/leader-fence.js';
import type { RunStore } from '../store/ports/runs.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import { TASK_INSTANCE_RESET } from '../store/task-instance-reset.js';
import type { TaskInstanceRow } from '../store/types.js';
import type { SpecCache } from '../store/spec-cache.js';

/** What happened to an agent process, for the attempt lifecycle's bookkeeping. */
export interface AgentExit {
  identity: AttemptIdentity;
  exitCode: number | null;
  signal: string | null;
  /** why it ended, when the executor knows better than an exit code (a pod OOM-killed, never pulled) */
  cause?: { code: string; message: string };
}

export interface FailureInput {
  exitCode?: number | null;
  reason: string;
  /** the reporting credential's dispatch generation; omitted by reapers (any dispatch) */
  dispatchGen?: number;
  /** a reaper's leader fence: the attempt's first write checks it (a deposed reaper fails nothing) */
  leader?: LeaderFence;
}

/**
 * The transitions one attempt goes through after dispatch. Every write is a compare-and-set on
 * (task instance, try, active state): a report from a superseded try, a reaper racing a late
 * report, or a duplicate delivery after a restart all find the expectation broken and change
 * nothing — the caller then tells the agent to stop.
 */
export class AttemptLifecycle {
  constructor(
    private readonly store: RunStore & TaskInstanceStore,
    private readonly specs: SpecCache,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly onChange: () => void,
  ) {}

  async markRunning(
    ti: TaskInstanceRow,
    tryNumber: number,
    hostname: string,
    pid: number,
    dispatchGen?: number,
  ): Promise<boolean> {
    const now = this.clock.now();
    const applied = await this.store.updateTaskInstance(
      ti.id,
      { states: ['queued'], try_number: tryNumber, dispatch_gen: dispatchGen },
      { state: 'running', started_at: now, last_heartbeat_at: now, hostname, pid },
      now,
    );
    if (applied) return true;
    // Already running (a repeated Register after a control-plane restart) is fine.
    const cur = await this.store.getTaskInstanceById(ti.id);
    return (
      cur !== undefined &&
      cur.try_number === tryNumber &&
      (dispatchGen === undefined || cur.dispatch_gen === dispatchGen) &&
      cur.state === 'running'
    );
  }

  /**
   * `decision`: a branch or short-circuit task's decision, written in the same compare-and-set
   * as its success, so the scheduler never sees the one without the other.
   */
  async succeed(
    tiId: string,
    tryNumber: number,
    exitCode: number,
    dispatchGen?: number,
    decision?: BranchDecision,
  ): Promise<boolean> {
    const now = this.clock.now();
    const applied = await this.store.updateTaskInstance(
      tiId,
      { states: ACTIVE_STATES, try_number: tryNumber, dispatch_gen: dispatchGen },
      {
        state: 'success',
        ended_at: now,
        exit_code: exitCode,
        error_message: null,
        ...(decision ? { decision } : {}),
      },
      now,
    );
    if (applied) this.onChange();
    return applied;
  }

  /**
   * An agent exited. If its attempt is still active its report never landed (a crash, an OOM
   * kill), so the attempt fails now rather than after the agent-lost threshold. An exit after
   * the report, or of a superseded dispatch, changes nothing.
   */
  async agentExited(exit: AgentExit): Promise<boolean> {
    const ti = await this.store.getTaskInstanceById(exit.identity.task_instance_id);
    if (!ti || ti.try_number !== exit.identity.try_number || !isActive(ti.state)) return false;
    const how = exit.signal ? `signal ${exit.signal}` : `code ${exit.exitCode ?? '?'}`;
    return this.fail(ti.id, ti.try_number, {
      reason: exit.cause
        ? `${exit.cause.code}: ${exit.cause.message}`
        : `agent exited (${how}) without reporting the task's outcome`,
      dispatchGen: exit.identity.dispatch_gen,
    });
  }

  /** Fails the attempt; retries apply. False when the attempt had already moved on. */
  async fail(tiId: string, tryNumber: number, input: FailureInput): Promise<boolean> {
    const now = this.clock.now();
    const ti = await this.store.getTaskInstanceById(tiId);
    if (!ti || ti.try_number !== tryNumber || !isActive(ti.state)) {
      return false;
    }
    if (input.dispatchGen !== undefined && ti.dispatch_gen !== input.dispatchGen) return false;
    // Every write below is pinned to the dispatch read here.
    const expect = { states: ACTIVE_STATES, try_number: tryNumber, dispatch_gen: ti.dispatch_gen };
    const run = await this.store.getRunById(ti.dag_run_id);
    if (!run) return false;
    const spec = await this.specs.get(run.tenant_id, run.dag_id, run.dag_version);
    const task = spec.tasks.find((t) => t.task_id === ti.task_id);
    const multiplier = task?.retry_exponential_backoff;
    const decision = afterFailure({
      tryNumber,
      maxTries: ti.max_tries,
      retryDelaySeconds: task?.retry_delay_seconds ?? spec.defaults.retry_delay_seconds,
      now,
      // Airflow's retry_exponential_backoff: its jitter hashes the run's logical date
      ...(multiplier !== undefined
        ? {
            backoff: {
              multiplier,
              ...(task?.max_retry_delay_seconds !== undefined
                ? { maxRetryDelaySeconds: task.max_retry_delay_seconds }
                : {}),
              dagId: ti.dag_id,
              taskId: ti.task_id,
              logicalDate: run.logical_date,
            },
          }
        : {}),
    });
    const outcome = { exit_code: input.exitCode ?? null, error_message: input.reason };
    let applied: boolean;
    if (decision.kind === 'retry') {
      // The history row is a copy of the live row, so the attempt's outcome goes on it first.
      const recorded = await this.store.updateTaskInstance(
        tiId,
        { ...expect, ...(input.leader ? { leader: input.leader } : {}) },
        { ended_at: now, ...outcome },
        now,
      );
      if (!recorded) return false;
      applied = await this.store.archiveAndBumpTry(
        tiId,
        expect,
        'failed',
        {
          state: 'up_for_retry',
          retry_at: decision.retryAt,
          ...TASK_INSTANCE_RESET,
          ...outcome,
        },
        now,
      );
    } else {
      applied = await this.store.updateTaskInstance(
        tiId,
        { ...expect, ...(input.leader ? { leader: input.leader } : {}) },
        { state: 'failed', ended_at: now, ...outcome },
        now,
      );
    }
    if (applied) {
      this.logger.info(
        {
          dag_id: ti.dag_id,
          task_id: ti.task_id,
          try: tryNumber,
          retry: decision.kind === 'retry',
        },
        `attempt failed: ${input.reason}`,
      );
      this.onChange();
    }
    return applied;
  }
}
