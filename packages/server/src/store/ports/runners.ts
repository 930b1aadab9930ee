import type { Page } from '../types.js';
import type { RunnerIdentity, RunnerRecord } from '../directory-types.js';

/** Runner records in the directory. Reads by tenant, except the door's lookup by token hash. */
export interface RunnerStore {
  /** false when the tenant already has a runner of that name */
  insertRunner(row: RunnerRecord): Promise<boolean>;
  getRunner(tenant_id: string, name: string): Promise<RunnerRecord | undefined>;
  listRunners(tenant_id: string, page: Page): Promise<RunnerRecord[]>;
  /** the deleted record (its id closes live sessions), or undefined when there was none */
  deleteRunner(tenant_id: string, name: string): Promise<RunnerRecord | undefined>;
  /**
   * The door's one lookup: by the SHA-256 of a presented token. Only inbound runners carry a
   * hash, so an ssh runner never matches.
   */
  runnerByTokenHash(token_hash: string): Promise<RunnerIdentity | undefined>;
  /** by id: the cell's check before it mints a connection secret, a live session's re-check */
  runnerById(id: string): Promise<RunnerIdentity | undefined>;
}
