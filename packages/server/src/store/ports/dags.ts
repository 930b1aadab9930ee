import type { DagSpec } from '@leoflow/core';
import type { DagImportErrorRow, DagRow, DagVersionRow, Page } from '../types.js';

export interface PutDagVersionOptions {
  /** a DAG registered for the first time starts paused (dags.paused_at_creation); default false */
  pausedAtCreation?: boolean;
  /**
   * where it comes from: its file relative to the DAGs folder, or null for a push; a
   * registration that says records it and makes the DAG active again (absent: left as it is).
   */
  sourceFile?: string | null;
}

/** DAGs and their registered versions (the compiled spec). */
export interface DagStore {
  /**
   * Registers a DAG version. If the spec's hash equals the current version's, nothing is
   * written and the current version is returned with created=false. A new DAG row starts paused
   * when opts.pausedAtCreation; an existing one keeps its paused state.
   */
  putDagVersion(
    tenant_id: string,
    spec: DagSpec,
    spec_hash: string,
    now: number,
    opts?: PutDagVersionOptions,
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
  /** a folder DAG whose file is gone is inactive (no scheduled run); true when it changed */
  setDagActive(tenant_id: string, dag_id: string, active: boolean, now: number): Promise<boolean>;
  /** the DAGs last registered from the DAGs folder, with their file */
  listFolderDags(
    tenant_id: string,
  ): Promise<{ dag_id: string; source_file: string; is_active: boolean }[]>;
  /**
   * Replaces the tenant's import errors with these (one per file): a file no longer listed is
   * removed, an unchanged one keeps its first_seen_at and updated_at.
   */
  setDagImportErrors(
    tenant_id: string,
    errors: Omit<DagImportErrorRow, 'tenant_id' | 'first_seen_at' | 'updated_at'>[],
    now: number,
  ): Promise<void>;
  listDagImportErrors(tenant_id: string): Promise<DagImportErrorRow[]>;
}
