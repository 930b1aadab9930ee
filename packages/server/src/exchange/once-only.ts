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

  /** False when the key was used already or is being used now. */
  claim(key: string): boolean {
    if (this.used.has(key) || this.inFlight.has(key)) return false;
    this.inFlight.add(key);
    return true;
  }

  /** The claimed work ended: `definite` keeps the key used, otherwise it is free again. */
  settle(key: string, definite: boolean): void {
    if (!this.inFlight.delete(key) || !definite) return;
    this.used.add(key);
    if (this.used.size > this.max) {
      const oldest = this.used.values().next().value;
      if (oldest !== undefined) this.used.delete(oldest);
    }
  }

  /** Whether the key is used, or in use right now. */
  has(key: string): boolean {
    return this.used.has(key) || this.inFlight.has(key);
  }

  /** Marks a key used whose once-only outcome was decided elsewhere (a deleted Secret). */
  markUsed(key: string): void {
    if (this.claim(key)) this.settle(key, true);
  }
}
