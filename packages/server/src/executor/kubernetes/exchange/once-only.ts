/**
 * Keys that may be used once (a token's hash, a pod's uid, an attempt): a bounded memory, oldest
 * first out, plus the keys in use right now. A key is claimed before the work it guards starts,
 * so two concurrent uses cannot both pass; it is kept once that work reached a definite outcome,
 * and released when it did not (the apiserver or the store could not answer), so asking again
 * later is not mistaken for a replay.
 */
export class OnceOnly {
  private readonly used = new Set<string>();
  private readonly inFlight = new Set<string>();

  constructor(private readonly max: number) {}

  /**
   * 'claimed': the caller now holds the key and must settle it. 'used': it reached a definite
   * outcome before. 'busy': another use of it is under way and has decided nothing yet (the
   * answer for a retry that overtook its own first try).
   */
  claim(key: string): 'claimed' | 'used' | 'busy' {
    if (this.used.has(key)) return 'used';
    if (this.inFlight.has(key)) return 'busy';
    this.inFlight.add(key);
    return 'claimed';
  }

  /** The claimed work ended: `definite` keeps the key used, otherwise it is free again. */
  settle(key: string, definite: boolean): void {
    if (this.inFlight.delete(key) && definite) this.remember(key);
  }

  /** Whether the key is used, or in use right now. */
  has(key: string): boolean {
    return this.used.has(key) || this.inFlight.has(key);
  }

  /** Marks a key used whose once-only outcome was decided elsewhere (a deleted Secret). */
  markUsed(key: string): void {
    this.inFlight.delete(key);
    this.remember(key);
  }

  private remember(key: string): void {
    this.used.add(key);
    if (this.used.size > this.max) {
      const oldest = this.used.values().next().value;
      if (oldest !== undefined) this.used.delete(oldest);
    }
  }
}
