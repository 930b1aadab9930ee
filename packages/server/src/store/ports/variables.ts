import type { Page } from '../types.js';
import type { VariableRecord } from '../vault-types.js';

/**
 * Variables (secret ones sealed). Scoped reads take the declared names and filter in the
 * query (never fetch-all-then-filter), so undeclared ciphertext never leaves the database.
 */
export interface VariableStore {
  putVariable(rec: VariableRecord): Promise<void>;
  getVariable(tenant_id: string, key: string): Promise<VariableRecord | undefined>;
  listVariables(tenant_id: string, page: Page): Promise<VariableRecord[]>;
  /** exactly the named keys that exist (any order); empty input → [] without a query */
  getVariablesByKeys(tenant_id: string, keys: readonly string[]): Promise<VariableRecord[]>;
  /** the whole tenant vault (permissive / off delivery) */
  getAllVariables(tenant_id: string): Promise<VariableRecord[]>;
  countVariables(tenant_id: string): Promise<number>;
  deleteVariable(tenant_id: string, key: string): Promise<boolean>;
  /** which of the given names exist for the tenant (registration-time check) */
  existingVariableKeys(tenant_id: string, keys: readonly string[]): Promise<Set<string>>;
}
