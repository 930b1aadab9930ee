import type { DagSpec } from '@leoflow/core';

/** A complete DagSpec for tests: sensible defaults, overridden per test. */
export function spec(partial: Partial<DagSpec> & Pick<DagSpec, 'dag_id' | 'tasks'>): DagSpec {
  return {
    schema_version: '1.0',
    description: '',
    owner: '',
    tags: [],
    schedule: null,
    schedule_timezone: 'UTC',
    start_date: null,
    end_date: null,
    catchup: false,
    max_active_runs: 16,
    max_active_tasks: 0,
    defaults: { retries: 0, retry_delay_seconds: 300, execution_timeout_seconds: null },
    params: {},
    variables: [],
    connections: [],
    ...partial,
  };
}

export function task(
  task_id: string,
  extra: Partial<DagSpec['tasks'][number]> = {},
): DagSpec['tasks'][number] {
  return {
    task_id,
    type: 'bash',
    command: `echo ${task_id}`,
    depends_on: [],
    trigger_rule: 'all_success',
    retries: 0,
    retry_delay_seconds: 300,
    execution_timeout_seconds: null,
    env: {},
    variables: [],
    connections: [],
    do_xcom_push: false,
    ...extra,
  };
}

/** A task-less DAG with the smallest limits: what storage tests push and re-push. */
export function minimalSpec(dag_id: string): DagSpec {
  return spec({
    dag_id,
    tasks: [],
    max_active_runs: 1,
    defaults: { retries: 0, retry_delay_seconds: 0, execution_timeout_seconds: null },
  });
}
