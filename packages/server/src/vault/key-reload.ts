import { statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { LeoflowError, VaultError, type Clock } from '@leoflow/core';
import { keyringFile, type FileSigningKeyring } from '../auth/signing-keys.js';
import { watchDirectories, type DirectoryWatch } from '../util/watch-directories.js';
import type { Keyring } from './keyring.js';
import type { VaultService } from './vault-service.js';

export type KeyReloadOutcome = 'applied' | 'unchanged' | 'refused' | 'throttled';

export interface VaultKeyringReloaderOptions {
  vault: Pick<VaultService, 'replaceKeyring' | 'keyUsage' | 'keyIds' | 'currentKeyId'>;
  /** reads the keyring source again (the keyring file; an env key cannot change at runtime) */
  load: () => Promise<Keyring>;
  clock: Clock;
  /** reloads triggered by an unknown key id happen at most this often (default 5 s) */
  minMissIntervalMs?: number;
  onError: (err: LeoflowError) => void;
  onApplied?: (change: { current_key_id: string; key_ids: string[]; dropped: string[] }) => void;
}

/** Only reload on a miss this often, so a flood of unknown key ids cannot become file reads. */
const DEFAULT_MIN_MISS_INTERVAL_MS = 5_000;

/**
 * Keeps this replica's vault keyring equal to the shared keyring file, without a restart: on a
 * change of the file's directory (watch), and once when a value needs a key id this replica does
 * not hold (another replica rotated first). A reload that would drop a key still sealing values
 * is refused — the keyring in memory stays — because adopting it would make those values
 * unreadable here; the operator removes an old key only after `rotate-key` reports none left.
 */
export class VaultKeyringReloader {
  readonly #opts: VaultKeyringReloaderOptions;
  #lastMissReload = Number.NEGATIVE_INFINITY;
  #watch: DirectoryWatch | undefined;
  #running: Promise<KeyReloadOutcome> | undefined;

  constructor(opts: VaultKeyringReloaderOptions) {
    this.#opts = opts;
  }

  /** Watches the directory of the keyring file. */
  watch(file: string, debounceMs = 200): void {
    this.#watch = watchDirectories([dirname(file)], () => void this.reloadNow(), {
      debounceMs,
      onError: (dir, err) =>
        this.#opts.onError(
          new VaultError(
            'LF_SECRET_KEYRING_INVALID',
            `the keyring directory ${dir} can no longer be watched (${err.message}); rotations reach this replica only on an unknown key id now`,
          ),
        ),
    });
  }

  stop(): void {
    this.#watch?.close();
  }

  /** VaultServiceOptions.onUnknownKey: one reload, rate-limited on the injected clock. */
  async onUnknownKey(_keyIds: string[]): Promise<KeyReloadOutcome> {
    const now = this.#opts.clock.now();
    if (now - this.#lastMissReload < (this.#opts.minMissIntervalMs ?? DEFAULT_MIN_MISS_INTERVAL_MS))
      return 'throttled';
    this.#lastMissReload = now;
    return this.reloadNow();
  }

  /** Re-reads the source now; concurrent calls share one reload. */
  reloadNow(): Promise<KeyReloadOutcome> {
    this.#running ??= this.#reload().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #reload(): Promise<KeyReloadOutcome> {
    const { vault } = this.#opts;
    let next: Keyring;
    try {
      next = await this.#opts.load();
    } catch (err) {
      this.#opts.onError(
        err instanceof LeoflowError
          ? err
          : new VaultError('LF_SECRET_KEYRING_INVALID', 'the keyring could not be re-read'),
      );
      return 'refused';
    }
    const before = vault.keyIds;
    const after = next.keyIds();
    if (next.currentKeyId === vault.currentKeyId && sameIds(before, after)) return 'unchanged';
    const dropped = before.filter((id) => !after.includes(id));
    if (dropped.length > 0) {
      const usage = await vault.keyUsage();
      const stillSealing = usage.filter((u) => dropped.includes(u.key_id) && u.sealed > 0);
      if (stillSealing.length > 0) {
        this.#opts.onError(
          new VaultError(
            'LF_SECRET_KEYRING_INVALID',
            `the keyring file no longer holds ${stillSealing
              .map((u) => `key ${u.key_id} (still sealing ${u.sealed} value(s))`)
              .join(', ')}; this replica keeps its keyring. Put the key back as an older key, ` +
              'run `leoflow secrets rotate-key --resume` until none remain under it, then remove it.',
            { key_ids: stillSealing.map((u) => u.key_id) },
          ),
        );
        return 'refused';
      }
    }
    vault.replaceKeyring(next, dropped);
    this.#opts.onApplied?.({ current_key_id: next.currentKeyId, key_ids: after, dropped });
    return 'applied';
  }
}

function sameIds(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((id) => b.includes(id));
}

/**
 * Keeps a replica's agent/user signing keyring equal to the shared keyring file: a rotation by
 * another replica (or `leoflow auth rotate-signing-key`) is picked up when the keys directory
 * changes, so this replica starts SIGNING with the new key too, not only verifying it on the
 * first unknown kid (FileSigningKeyring.refresh, which stays as the backstop).
 */
export function reloadSigningKeyringOnChange(
  ring: Pick<FileSigningKeyring, 'dataDir' | 'purpose' | 'reload' | 'current'>,
  opts: {
    onError: (err: unknown) => void;
    onApplied?: (kid: string) => void;
    debounceMs?: number;
  },
): DirectoryWatch {
  const file = keyringFile(ring.dataDir, ring.purpose);
  // Only a new file (a rotation renames one into place) or new content is a change: a chmod
  // or a lock file beside it is not, and reloading on those would re-tighten a loosened mode
  // before `leoflow doctor` could report it.
  let seen = fileIdentity(file);
  return watchDirectories(
    [join(ring.dataDir, 'keys')],
    () => {
      const now = fileIdentity(file);
      if (now === seen) return;
      seen = now;
      const before = ring.current().kid;
      ring.reload().then(
        () => {
          const kid = ring.current().kid;
          if (kid !== before) opts.onApplied?.(kid);
        },
        (err: unknown) => opts.onError(err),
      );
    },
    { debounceMs: opts.debounceMs ?? 200, onError: (_dir, err) => opts.onError(err) },
  );
}

function fileIdentity(file: string): string {
  try {
    const st = statSync(file);
    return `${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return 'absent';
  }
}
