import type { SealedRef } from '../vault-types.js';

/**
 * Inbound runners' sealed tokens in the directory, for key rotation: the same listing, counting
 * and compare-and-set as SealedValueStore, for refs of kind 'runner_token' (id = runner id).
 *
 * Each takes the key ids the caller's keyring holds (`among`): Pro cells may share one
 * directory while each seals with a keyring of its own, so a token under a key id the caller
 * never held is another cell's — not its to re-encrypt, and not counted against its keys.
 */
export interface RunnerTokenSealStore {
  /** sealed tokens under a key id in `among` other than `key_id`, ordered by runner id (batch) */
  listRunnerTokensNotUnderKey(
    key_id: string,
    among: readonly string[],
    limit: number,
  ): Promise<SealedRef[]>;
  /**
   * CAS: replaces the token's ciphertext only if the row (by runner id and tenant) still holds
   * exactly `ref.cipher` under `ref.key_id`; false when it changed or is gone.
   */
  resealRunnerTokenIfUnchanged(
    ref: SealedRef,
    cipher: Uint8Array,
    new_key_id: string,
  ): Promise<boolean>;
  /** how many sealed tokens each key id in `among` holds (ids holding none are left out) */
  countRunnerTokensByKeyId(among: readonly string[]): Promise<Map<string, number>>;
}
