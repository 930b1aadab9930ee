import { randomBytes } from 'node:crypto';
import {
  clearTargets,
  isActive,
  isTerminal,
  markTargets,
  type TaskInstanceState,
  LeoflowError,
  manualRunId,
  type Clock,
  DagError,
} from '@leoflow/core';
import type { DagStore } from '../store/ports/dags.js';
import type { RunStore } from '../store/ports/runs.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import { TASK_INSTANCE_RESET } from '../store/task-instance-reset.js';
import type { DagRunRow, TaskInstanceRow } from '../store/types.js';

export type MarkState = 'success' | 'failed';

export interface MarkInput {
  /** null: the whole run (Airflow's "mark run success/failed") */
  taskIds: string[] | null;
  state: string;
  downstream: boolean;
  upstream: boolean;
}

/**
 * Stops a live attempt of a task instance that is being marked and revokes its credential (the
 * revocation path, attempts/revocation.ts, with terminate): its token resolves no secret from
 * the moment the mark is written, and its executor is asked to stop it.
 */
export type StopAttempt = (ti: TaskInstanceRow) => Promise<void>;

export interface TriggerInput {
  conf?: Record<string, unknown>;
  runId?: string;
  logicalDate?: number | null;
}

/** Operator actions on runs: manual trigger and clear-and-rerun. */
export class RunOperations {
  constructor(
    private readonly store: DagStore & RunStore & TaskInstanceStore,
    private readonly clock: Clock,
    private readonly onChange: () => void,
  ) {}

  async trigger(tenantId: string, dagId: string, input: TriggerInput): Promise<DagRunRow> {
    if (input.runId === 'latest') {
      // `latest` names the newest run in every CLI command; a run of that name could not be named.
      throw new LeoflowError(
        'LF_RUN_ID_RESERVED',
        'the run id "latest" is reserved (the CLI reads it as the newest run); choose another --run-id or omit it',
      );
    }
    const dag = await this.store.getDag(tenantId, dagId);
    if (!dag) {
      throw new DagError(
        'LF_DAG_NOT_FOUND',
        `no DAG "${dagId}"; list DAGs with \`leoflow dags list\` or push it with \`leoflow dags push <dir>\``,
      );
    }
    const version = await this.store.getDagVersion(tenantId, dagId, dag.current_version);
    if (!version)
      throw new DagError('LF_DAG_VERSION_NOT_FOUND', `DAG ${dagId} has no current version`);
    const spec = version.spec;
    const now = this.clock.now();
    const conf = input.conf ?? {};
    checkConf(conf);
    const runId = input.runId ?? manualRunId(now, randomBytes(3).toString('hex'));
    const run = await this.store.createRun({
      tenant_id: tenantId,
      dag_id: dagId,
      run_id: runId,
      run_type: 'manual',
      dag_version: version.version,
      logical_date: input.logicalDate ?? now,
      data_interval_start: input.logicalDate ?? now,
      data_interval_end: input.logicalDate ?? now,
      conf,
      tasks: spec.tasks.map((t) => ({ task_id: t.task_id, max_tries: t.retries + 1 })),
      now,
    });
    if (!run) {
      throw new LeoflowError(
        'LF_RUN_EXISTS',
        `DAG ${dagId} already has a run "${runId}"; choose another --run-id or omit it`,
      );
    }
    this.onChange();
    return run;
  }

  /**
   * Clear-and-rerun: each cleared task instance is archived to history and gets a new try
   * (a new attempt, so a new credential lineage); the run re-binds to the DAG's current
   * version. Active task instances are refused: clearing them would race a live attempt.
   */
  async clear(
    tenantId: string,
    dagId: string,
    runId: string,
    opts: { taskIds: string[] | null; downstream: boolean },
  ): Promise<{ run: DagRunRow; cleared: string[] }> {
    const run = await this.store.getRun(tenantId, dagId, runId);
    if (!run) {
      throw new LeoflowError(
        'LF_RUN_NOT_FOUND',
        `DAG ${dagId} has no run "${runId}"; see \`leoflow runs list\``,
      );
    }
    const dag = await this.store.getDag(tenantId, dagId);
    if (!dag) throw new DagError('LF_DAG_NOT_FOUND', `no DAG "${dagId}"`);
    const current = await this.store.getDagVersion(tenantId, dagId, dag.current_version);
    if (!current)
      throw new DagError('LF_DAG_VERSION_NOT_FOUND', `DAG ${dagId} has no current version`);
    const spec = current.spec;
    const known = new Set(spec.tasks.map((t) => t.task_id));

    let targets: string[];
    if (opts.taskIds === null) {
      targets = spec.tasks.map((t) => t.task_id);
    } else {
      for (const id of opts.taskIds) {
        if (!known.has(id)) {
          throw new LeoflowError(
            'LF_TASK_NOT_FOUND',
            `DAG ${dagId} (version ${current.version}) has no task "${id}"`,
          );
        }
      }
      // Airflow's clear: with their downstream tasks if asked, and with the setups they run
      // inside (and those setups' teardowns), so the work re-runs in fresh resources.
      const set = new Set(clearTargets(spec, opts.taskIds, { downstream: opts.downstream }));
      targets = spec.tasks.map((t) => t.task_id).filter((id) => set.has(id));
    }

    // A mapped task has one row per map index.
    const rows = new Map<string, TaskInstanceRow[]>();
    for (const ti of await this.store.listTaskInstances(run.id)) {
      rows.set(ti.task_id, [...(rows.get(ti.task_id) ?? []), ti]);
    }
    const busy = targets.filter((id) => (rows.get(id) ?? []).some((ti) => isActive(ti.state)));
    if (busy.length > 0) {
      throw new LeoflowError(
        'LF_TASK_ACTIVE',
        `cannot clear ${busy.join(', ')}: still queued or running; wait for the attempt to finish and clear again`,
      );
    }

    const now = this.clock.now();
    await this.store.setRunVersion(run.id, current.version);
    // Tasks added in the current version get their task instances now.
    await this.store.ensureTaskInstances(
      run.id,
      spec.tasks.map((t) => ({ task_id: t.task_id, max_tries: t.retries + 1 })),
      now,
    );
    const cleared: string[] = [];
    for (const id of targets) {
      const task = spec.tasks.find((t) => t.task_id === id);
      if (!task) continue;
      const all = rows.get(id) ?? [];
      if (all.some((ti) => ti.map_index >= 0)) {
        // Back to one unexpanded instance: it expands afresh (its list may have changed).
        if (await this.store.resetMappedTask(run.id, id, task.retries, now)) cleared.push(id);
        continue;
      }
      const ti = all[0];
      if (!ti) continue; // created just now by ensureTaskInstances, already in state none
      if (ti.state === 'none') continue;
      const applied = await this.store.archiveAndBumpTry(
        ti.id,
        { states: [ti.state], try_number: ti.try_number },
        ti.state,
        {
          state: 'none',
          max_tries: ti.try_number + 1 + task.retries,
          ...TASK_INSTANCE_RESET,
          retry_at: null,
          exit_code: null,
          error_message: null,
          decision: null,
        },
        now,
      );
      if (applied) cleared.push(id);
    }
    await this.store.setRunState(run.id, ['success', 'failed', 'running', 'queued'], 'queued', {
      ended_at: null,
    });
    this.onChange();
    const after = await this.store.getRunById(run.id);
    return { run: after ?? run, cleared };
  }
  /**
   * Mark success / mark failed (Airflow's mark dialog). For tasks: the named tasks, with their
   * downstream and/or upstream tasks when asked; each of their task instances (every map index
   * of a mapped task) not already in the state is set to it, a live attempt first stopped and
   * its credential revoked. A finished run goes back to queued so the scheduler decides its
   * state (and its unfinished tasks) again. For the whole run (taskIds null): success marks
   * every task instance success; failed marks live ones failed and unfinished ones skipped (as
   * Airflow does), and the run takes the state at once. Every input is checked before the first
   * write; each write is a compare-and-set on the state and try it was read in.
   */
  async mark(
    tenantId: string,
    dagId: string,
    runId: string,
    input: MarkInput,
    stop: StopAttempt,
  ): Promise<{ run: DagRunRow; marked: string[] }> {
    if (input.state !== 'success' && input.state !== 'failed') {
      throw new LeoflowError(
        'LF_MARK_BAD_STATE',
        `cannot mark with state "${String(input.state)}": use success or failed`,
      );
    }
    const state: MarkState = input.state;
    const run = await this.store.getRun(tenantId, dagId, runId);
    if (!run) {
      throw new LeoflowError(
        'LF_RUN_NOT_FOUND',
        `DAG ${dagId} has no run "${runId}"; see \`leoflow runs list\``,
      );
    }
    const version = await this.store.getDagVersion(tenantId, dagId, run.dag_version);
    if (!version) {
      throw new DagError(
        'LF_DAG_VERSION_NOT_FOUND',
        `DAG ${dagId} has no version ${run.dag_version}`,
      );
    }
    const spec = version.spec;
    const wholeRun = input.taskIds === null;
    let targets: Set<string>;
    if (input.taskIds === null) {
      targets = new Set(spec.tasks.map((t) => t.task_id));
    } else {
      if (input.taskIds.length === 0) {
        throw new LeoflowError('LF_TASK_NOT_FOUND', 'name at least one task to mark');
      }
      for (const id of input.taskIds) {
        if (!spec.tasks.some((t) => t.task_id === id)) {
          throw new LeoflowError(
            'LF_TASK_NOT_FOUND',
            `DAG ${dagId} (version ${version.version}) has no task "${id}"`,
          );
        }
      }
      targets = new Set(
        markTargets(spec, input.taskIds, {
          downstream: input.downstream,
          upstream: input.upstream,
        }),
      );
    }
    const order = new Map(spec.tasks.map((t, i) => [t.task_id, i]));
    const rows = (await this.store.listTaskInstances(run.id))
      .filter((ti) => targets.has(ti.task_id))
      .sort(
        (a, b) =>
          (order.get(a.task_id) ?? 0) - (order.get(b.task_id) ?? 0) || a.map_index - b.map_index,
      );

    const marked: string[] = [];
    for (const first of rows) {
      let ti: TaskInstanceRow | undefined = first;
      // Re-read and retry when the row moved between the read and the write (an attempt
      // finishing, the scheduler advancing it): the mark applies to whatever state it is in.
      for (let round = 0; ti && round < 5; round++) {
        const to = targetState(ti.state, state, wholeRun);
        if (to === null) break;
        if (isActive(ti.state)) await stop(ti);
        const now = this.clock.now();
        const applied = await this.store.updateTaskInstance(
          ti.id,
          { states: [ti.state], try_number: ti.try_number },
          { state: to, ended_at: now, retry_at: null },
          now,
        );
        if (applied) {
          marked.push(ti.map_index >= 0 ? `${ti.task_id}[${ti.map_index}]` : ti.task_id);
          break;
        }
        ti = await this.store.getTaskInstanceById(ti.id);
      }
    }

    const now = this.clock.now();
    if (wholeRun) {
      await this.store.setRunState(run.id, ['queued', 'running', 'success', 'failed'], state, {
        ended_at: now,
      });
    } else if (marked.length > 0) {
      await this.store.setRunState(run.id, ['success', 'failed'], 'queued', { ended_at: null });
    }
    this.onChange();
    const after = await this.store.getRunById(run.id);
    return { run: after ?? run, marked };
  }
}

function checkConf(conf: Record<string, unknown>): void {
  if (typeof conf !== 'object' || conf === null || Array.isArray(conf)) {
    throw new LeoflowError(
      'LF_RUN_BAD_CONF',
      'run conf must be a JSON object, e.g. --conf \'{"day":"2026-01-01"}\'',
    );
  }
}

/**
 * The state a task instance takes when marked, or null when it is left alone: already there;
 * marking a whole run failed sets live instances failed and unfinished ones skipped, and leaves
 * finished ones as they ended.
 */
function targetState(
  from: TaskInstanceState,
  state: MarkState,
  wholeRun: boolean,
): TaskInstanceState | null {
  if (from === state) return null;
  if (wholeRun && state === 'failed') {
    if (isActive(from)) return 'failed';
    return isTerminal(from) ? null : 'skipped';
  }
  return state;
}
