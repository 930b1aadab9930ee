import type { Migration } from 'kysely';
import type { Db } from './dialect.js';

export function migration0017PrevSuccessIndex(): Migration {
  return {
    async up(db: Db): Promise<void> {
      // Airflow's prev_data_interval_*_success (issue 40): every attempt's spec names the data
      // interval of its DAG's latest successful run before its own logical date, so that read
      // sits on the dispatch path and must not scan a DAG's whole run history.
      await db.schema
        .createIndex('dag_runs_tenant_dag_state_logical_idx')
        .on('dag_runs')
        .columns(['tenant_id', 'dag_id', 'state', 'logical_date'])
        .execute();
    },
  };
}
