import { VaultError } from '@leoflow/core';
import {
  addKeyToKeyringFile,
  loadKeyring,
  removeKeysFromKeyringFile,
  type KeyringSource,
} from './index.js';
import type { VaultService } from './vault-service.js';

export interface KeyRotationDeps {
  vault: VaultService;
  dataDir: string;
  keyringSource: KeyringSource;
  keyringFile: string | null;
}

export interface RotationResult {
  current_key_id: string;
  new_key: boolean;
  resealed: number;
  remaining_under_old_keys: number;
  pruned: string[];
}

/**
 * `leoflow secrets rotate-key`, online: a new key becomes current (written to the keyring
 * file, older keys kept), this process seals with it at once, then every stored value is
 * re-encrypted in batches. Interrupted, it resumes with `resume` (no new key). `prune` drops
 * old keys once nothing is sealed under them — never before, so no secret is ever lost.
 */
export async function rotateVaultKey(
  deps: KeyRotationDeps,
  opts: { resume: boolean; prune: boolean; batchSize?: number },
): Promise<RotationResult> {
  if (deps.keyringSource === 'env' || deps.keyringFile === null) {
    throw new VaultError(
      'LF_SECRET_ROTATION_UNSUPPORTED',
      'the vault key comes from LEOFLOW_SECRET_KEY: set it to the new key and LEOFLOW_SECRET_KEY_PREVIOUS ' +
        'to the old one, restart, then run `leoflow secrets rotate-key --resume`',
    );
  }
  const file = deps.keyringFile;
  const reload = async () =>
    (await loadKeyring({ edition: 'lite', dataDir: deps.dataDir, env: {}, keyringFile: file }))
      .keyring;
  let newKey = false;
  if (!opts.resume) {
    await addKeyToKeyringFile(file);
    deps.vault.replaceKeyring(await reload());
    newKey = true;
  }
  const { resealed } = await deps.vault.rotateKeys({ batchSize: opts.batchSize ?? 200 });
  const remaining = await deps.vault.remainingUnderOldKeys();
  let pruned: string[] = [];
  if (opts.prune && remaining === 0) {
    const unused = (await deps.vault.keyUsage())
      .filter((k) => !k.current && k.in_keyring && k.sealed === 0)
      .map((k) => k.key_id);
    if (unused.length > 0) {
      pruned = await removeKeysFromKeyringFile(file, unused);
      deps.vault.replaceKeyring(await reload(), pruned);
    }
  }
  return {
    current_key_id: deps.vault.currentKeyId,
    new_key: newKey,
    resealed,
    remaining_under_old_keys: remaining,
    pruned,
  };
}
