import { randomBytes } from 'node:crypto';
import {
  clearTargets,
  isActive,
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
}

function checkConf(conf: Record<string, unknown>): void {
  if (typeof conf !== 'object' || conf === null || Array.isArray(conf)) {
    throw new LeoflowError(
      'LF_RUN_BAD_CONF',
      'run conf must be a JSON object, e.g. --conf \'{"day":"2026-01-01"}\'',
    );
  }
}
