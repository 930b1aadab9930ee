interface Closable {
  close(code: number, reason: string): void;
}

/** Live sessions by runner id, so deleting a runner closes every one of them at once. */
export class RunnerSessions {
  readonly #byRunner = new Map<string, Set<Closable>>();

  add(runner_id: string, session: Closable): () => void {
    let set = this.#byRunner.get(runner_id);
    if (!set) this.#byRunner.set(runner_id, (set = new Set()));
    set.add(session);
    return () => {
      const s = this.#byRunner.get(runner_id);
      if (!s) return;
      s.delete(session);
      if (s.size === 0) this.#byRunner.delete(runner_id);
    };
  }

  /** Closes every live session of the runner; returns how many. */
  closeRunner(runner_id: string, why: { code: number; reason: string }): number {
    const set = this.#byRunner.get(runner_id);
    if (!set) return 0;
    this.#byRunner.delete(runner_id);
    for (const s of set) s.close(why.code, why.reason);
    return set.size;
  }

  closeAll(why: { code: number; reason: string }): void {
    for (const id of [...this.#byRunner.keys()]) this.closeRunner(id, why);
  }

  runnerIds(): string[] {
    return [...this.#byRunner.keys()];
  }

  count(runner_id?: string): number {
    if (runner_id !== undefined) return this.#byRunner.get(runner_id)?.size ?? 0;
    let n = 0;
    for (const s of this.#byRunner.values()) n += s.size;
    return n;
  }
}
