import { create } from '@bufbuild/protobuf';
import { TaskSpecSchema, TaskType, type TaskSpec } from '@leoflow/protocol';
import type { DagSpec, TaskSpecDef, TaskType as AuthoredTaskType } from '@leoflow/core';
import type { DagRunRow, TaskInstanceRow } from '../store/types.js';

const TASK_TYPES: Record<AuthoredTaskType, TaskType> = {
  bash: TaskType.BASH,
  python: TaskType.PYTHON,
  node: TaskType.NODE,
};

/**
 * What an attempt's agent is told to run: the answer of GetTaskSpec, and what the subprocess
 * executor hands a standby agent on its pipe together with the token (so the agent need not
 * ask). One builder, so both carry the same bytes. It holds no secret: author env keys under
 * LEOFLOW_ are reserved for the platform and dropped here.
 */
export function taskSpecMessage(
  run: Pick<
    DagRunRow,
    | 'tenant_id'
    | 'dag_id'
    | 'dag_version'
    | 'run_id'
    | 'run_type'
    | 'conf'
    | 'logical_date'
    | 'data_interval_start'
    | 'data_interval_end'
  >,
  ti: Pick<TaskInstanceRow, 'id' | 'task_id' | 'try_number' | 'max_tries'> &
    Partial<Pick<TaskInstanceRow, 'map_index' | 'map_value'>>,
  dag: Pick<DagSpec, 'params'>,
  task: TaskSpecDef,
  /** the data interval of the DAG's latest successful run before this one (previousSuccess) */
  prev?: { start: number | null; end: number | null },
): TaskSpec {
  const params = { ...dag.params, ...run.conf };
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(task.env)) if (!/^leoflow_/i.test(k)) env[k] = v;
  // A map index's own arguments (fixed when the task expanded), beside its constant env.
  for (const [k, v] of Object.entries(ti.map_value ?? {})) if (!/^leoflow_/i.test(k)) env[k] = v;
  const mapped = ti.map_index !== undefined && ti.map_index >= 0;
  return create(TaskSpecSchema, {
    tenantId: run.tenant_id,
    dagId: run.dag_id,
    dagVersion: run.dag_version,
    runId: run.run_id,
    taskId: ti.task_id,
    tryNumber: ti.try_number,
    maxTries: ti.max_tries,
    type: TASK_TYPES[task.type],
    command: task.command,
    env,
    executionTimeoutSeconds: task.execution_timeout_seconds ?? 0,
    doXcomPush: task.do_xcom_push,
    dependsOn: task.depends_on,
    logicalDate: iso(run.logical_date),
    dataIntervalStart: iso(run.data_interval_start),
    dataIntervalEnd: iso(run.data_interval_end),
    paramsJson: JSON.stringify(params),
    confJson: JSON.stringify(run.conf),
    runType: run.run_type,
    taskInstanceId: ti.id,
    ...(mapped ? { mapIndex: ti.map_index } : {}),
    prevDataIntervalStartSuccess: iso(prev?.start ?? null),
    prevDataIntervalEndSuccess: iso(prev?.end ?? null),
    templated: task.templated === true,
  });
}

/**
 * What taskSpecMessage's `prev` needs: the data interval of the DAG's latest successful run
 * before this one, read only for runs with a logical date (Airflow has the value only then).
 */
export async function previousSuccess(
  store: {
    previousSuccessInterval(
      tenant_id: string,
      dag_id: string,
      before: number,
    ): Promise<{ start: number | null; end: number | null } | undefined>;
  },
  run: Pick<DagRunRow, 'tenant_id' | 'dag_id' | 'logical_date'>,
): Promise<{ start: number | null; end: number | null } | undefined> {
  if (run.logical_date === null) return undefined;
  return store.previousSuccessInterval(run.tenant_id, run.dag_id, run.logical_date);
}

function iso(ms: number | null): string {
  return ms === null ? '' : new Date(ms).toISOString();
}
