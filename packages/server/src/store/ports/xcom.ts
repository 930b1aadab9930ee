import type { XComRow } from '../types.js';

/** XCom values pushed by tasks, keyed by (run, task, key). */
export interface XComStore {
  putXCom(row: XComRow): Promise<void>;
  /**
   * The PushXCom fence: writes only while (task_instance_id, try_number) is the live try
   * (queued|running), checked in the same transaction as the write; false when it is not.
   */
  putXComIfLive(row: XComRow, task_instance_id: string, try_number: number): Promise<boolean>;
  getXCom(dag_run_id: string, task_id: string, key: string): Promise<XComRow | undefined>;
  listXComs(dag_run_id: string, task_id?: string): Promise<XComRow[]>;
}
