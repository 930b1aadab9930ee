import type { SealedKind, SealedRef } from '../vault-types.js';

/**
 * A cell's sealed values (variables and connections) across tenants, for key rotation (online
 * re-encryption). Runner tokens are in the directory: RunnerTokenSealStore.
 */
export interface SealedValueStore {
  /** sealed values not under `key_id`, across tenants, for online re-encryption (batch) */
  listSealedNotUnderKey(key_id: string, limit: number): Promise<SealedRef[]>;
  /** CAS: replace the ciphertext only if it is still sealed under `expect_key_id` */
  resealValue(
    kind: SealedKind,
    tenant_id: string,
    id: string,
    expect_key_id: string,
    cipher: Uint8Array,
    new_key_id: string,
    now: number,
  ): Promise<boolean>;
  /**
   * Stricter CAS used by key rotation: replaces the ciphertext only if the row still holds
   * exactly `ref.cipher` under `ref.key_id`. Guarding on the key id alone would let a rotation
   * overwrite a newer value written by a replica that still seals with the old key.
   */
  resealIfUnchanged(
    ref: SealedRef,
    cipher: Uint8Array,
    new_key_id: string,
    now: number,
  ): Promise<boolean>;
  /** how many sealed values (variables + connections, all tenants) each key id holds */
  countSealedByKeyId(): Promise<Map<string, number>>;
}
