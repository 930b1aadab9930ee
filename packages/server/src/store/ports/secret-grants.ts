import type { SecretGrants } from '@leoflow/core';

export type SecretGrantKind = 'variables' | 'connections';

/**
 * Secret grants (issue 34): the DAG id patterns that may declare a Variable or a Connection, on
 * its row. Registration reads them with the existence check (one query per kind), delivery with
 * the values (they are columns of the same rows).
 */
export interface SecretGrantStore {
  /**
   * The grants of each named secret that exists (a name absent from the map does not exist);
   * empty input → an empty map without a query.
   */
  getSecretGrants(
    tenant_id: string,
    kind: SecretGrantKind,
    names: readonly string[],
  ): Promise<Map<string, SecretGrants>>;
  /** Replaces a secret's grants; false when it does not exist. */
  setSecretGrants(
    tenant_id: string,
    kind: SecretGrantKind,
    name: string,
    grants: SecretGrants,
    now: number,
  ): Promise<boolean>;
}
