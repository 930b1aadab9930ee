export type SecretScopingMode = 'permissive' | 'enforce' | 'off';
export type SecretLivenessMode = 'observe' | 'enforce';

/** How one GetVariables / GetConnections call reads the vault. */
export type ScopePlan =
  /** enforce with an empty declaration, or an unknown mode: nothing, and the store is not touched */
  | { read: 'nothing' }
  /** enforce: one query restricted to the declared names */
  | { read: 'declared'; names: string[] }
  /** permissive / off: the whole tenant vault; warn when a non-empty declaration is narrower */
  | { read: 'all'; warnWhenNarrower: boolean }
  /**
   * enforce, but the declaration could not be read (the run or its DAG version is missing or
   * unreadable — a datastore-side problem, not a verdict on the task): nothing is read, and the
   * caller answers "unavailable, retry" rather than an empty grant or the whole vault.
   */
  | { read: 'unavailable' };

/**
 * @param declared the task's declared names, or undefined when the declaration could not be read
 *   (inconclusive: never treated as "declared nothing" and never as "not live").
 */
export function planScope(
  mode: SecretScopingMode,
  declared: readonly string[] | undefined,
): ScopePlan {
  switch (mode) {
    case 'enforce':
      if (declared === undefined) return { read: 'unavailable' };
      return declared.length === 0
        ? { read: 'nothing' }
        : { read: 'declared', names: [...declared] };
    case 'permissive':
      // The whole vault is delivered either way; without a declaration there is nothing to
      // compare it with, so no warning.
      return { read: 'all', warnWhenNarrower: declared !== undefined && declared.length > 0 };
    case 'off':
      return { read: 'all', warnWhenNarrower: false };
    default: {
      // A mode this code does not know (a cast, a newer config): the safe answer is nothing.
      const unknown: never = mode;
      void unknown;
      return { read: 'nothing' };
    }
  }
}

/**
 * Permissive mode warns when a non-empty declaration covers fewer names than the vault holds,
 * i.e. the task is receiving names it did not declare. Counts only, never names.
 */
export function isNarrowerThanVault(
  declared: readonly string[],
  vaultNames: ReadonlySet<string>,
): boolean {
  if (declared.length === 0) return false;
  const present = declared.filter((n) => vaultNames.has(n)).length;
  return present < vaultNames.size;
}

export type LivenessVerdict =
  | { kind: 'deliver' }
  /** observe mode, positively not live: deliver, but record that enforce would have denied */
  | { kind: 'deliver_would_deny' }
  | { kind: 'deny'; reason: 'not_live' | 'revoked' };

/**
 * The liveness gate. Deny only on a positive answer: an inconclusive read (undefined, e.g. a
 * datastore blip) delivers, because failing closed on a transient error would break live
 * pipelines. Revocation is an explicit operator act and denies in either mode.
 */
export function livenessVerdict(
  mode: SecretLivenessMode,
  liveness: { live: boolean; revoked: boolean } | undefined,
): LivenessVerdict {
  if (liveness === undefined) return { kind: 'deliver' };
  if (liveness.revoked) return { kind: 'deny', reason: 'revoked' };
  if (liveness.live) return { kind: 'deliver' };
  return mode === 'enforce' ? { kind: 'deny', reason: 'not_live' } : { kind: 'deliver_would_deny' };
}
