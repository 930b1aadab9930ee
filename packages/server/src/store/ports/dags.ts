import type { DagSpec } from '@leoflow/core';
import type { DagRow, DagVersionRow, Page } from '../types.js';

/** DAGs and their registered versions (the compiled spec). */
export interface DagStore {
  /**
   * Registers a DAG version. If the spec's hash equals the current version's, nothing is
   * written and the current version is returned with created=false.
   */
  putDagVersion(
    tenant_id: string,
    spec: DagSpec,
    spec_hash: string,
    now: number,
  ): Promise<{ version: number; created: boolean }>;
  getDag(tenant_id: string, dag_id: string): Promise<DagRow | undefined>;
  listDags(tenant_id: string, page: Page): Promise<DagRow[]>;
  /** every unpaused DAG of every tenant (the cron planner's input) */
  listSchedulableDags(): Promise<DagRow[]>;
  getDagVersion(
    tenant_id: string,
    dag_id: string,
    version: number,
  ): Promise<DagVersionRow | undefined>;
  listDagVersions(tenant_id: string, dag_id: string): Promise<Omit<DagVersionRow, 'spec'>[]>;
  setDagPaused(tenant_id: string, dag_id: string, paused: boolean, now: number): Promise<boolean>;
}
