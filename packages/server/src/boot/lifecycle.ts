/**
 * One part of a running control plane, registered as it starts. `close()` stops every part and
 * `drain()` releases the ones that can outlive this process (a Pro replica's running agents),
 * both walking the one list in reverse: what started last stops first, so a part never outlives
 * what it uses.
 */
export interface LifecyclePart {
  name: string;
  stop(): Promise<void> | void;
  /** drain() calls this instead of stop() (a draining replica lets its agents run on) */
  release?(): Promise<void> | void;
  /** for /readyz: whether the part still runs; omitted, it runs until it is stopped */
  running?(): boolean;
}

export class Lifecycle {
  readonly #parts: LifecyclePart[] = [];
  #ending: Promise<void> | null = null;

  /** `onStopError`: a part that fails to stop is logged and the walk goes on */
  constructor(private readonly onStopError: (part: string, err: unknown) => void) {}

  add(part: LifecyclePart): void {
    if (this.#ending) throw new Error(`${part.name} started while the control plane is stopping`);
    this.#parts.push(part);
  }

  /** The parts registered, in start order (tests and /readyz read it). */
  names(): string[] {
    return this.#parts.map((p) => p.name);
  }

  /** Names of the parts that have stopped running on their own. */
  notRunning(): string[] {
    return this.#parts.filter((p) => p.running && !p.running()).map((p) => p.name);
  }

  /** Stops every part, last started first. Idempotent: a second call waits for the first. */
  close(): Promise<void> {
    this.#ending ??= this.#walk((p) => p.stop());
    return this.#ending;
  }

  /** Releases (or, without a release, stops) every part, last started first. */
  drain(): Promise<void> {
    this.#ending ??= this.#walk((p) => (p.release ? p.release() : p.stop()));
    return this.#ending;
  }

  async #walk(step: (p: LifecyclePart) => Promise<void> | void): Promise<void> {
    for (const part of [...this.#parts].reverse()) {
      try {
        await step(part);
      } catch (err) {
        this.onStopError(part.name, err);
      }
    }
  }
}
