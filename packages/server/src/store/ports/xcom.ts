import type { XComRow } from '../types.js';

/** The attempt a fenced write is for: its task instance, try and dispatch generation. */
export interface AttemptWriteFence {
  task_instance_id: string;
  try_number: number;
  dispatch_gen: number;
}

/** XCom values pushed by tasks, keyed by (run, task, map index, key). */
export interface XComStore {
  putXCom(row: XComRow): Promise<void>;
  /**
   * The PushXCom fence: writes only while the task instance's row holds this try and dispatch
   * generation in queued|running, checked in the same transaction as the write; false, and
   * nothing written, when it does not (a later try, a requeue to the next generation, an end).
   */
  putXComIfLive(row: XComRow, fence: AttemptWriteFence): Promise<boolean>;
  /** One value of (run, task, map index, key); map index -1 (the default): an unmapped task. */
  getXCom(
    dag_run_id: string,
    task_id: string,
    key: string,
    map_index?: number,
  ): Promise<XComRow | undefined>;
  listXComs(dag_run_id: string, task_id?: string, map_index?: number): Promise<XComRow[]>;
  /** A mapped task's values of `key`, one per map index that pushed one, in map-index order. */
  listMappedXComs(dag_run_id: string, task_id: string, key: string): Promise<XComRow[]>;
}
