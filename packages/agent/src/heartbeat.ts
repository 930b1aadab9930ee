import type { HeartbeatResponse } from '@leoflow/protocol';
import { codeName } from './retry.js';
import type { TokenHolder } from './token.js';

/** The clock and timer the heartbeat loop runs on; tests pass a manual one. */
export interface HeartbeatTimers {
  now(): number;
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: HeartbeatTimers = {
  now: () => Date.now(),
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface HeartbeatLoopOptions {
  intervalMs: number;
  timers: HeartbeatTimers;
  tokens: TokenHolder;
  /** one Heartbeat RPC (the caller adds its own timeout) */
  send(sentAtMs: number): Promise<HeartbeatResponse>;
  onTerminate(reason: string): void;
  log(level: 'info' | 'warn', message: string): void;
}

/**
 * The first beat goes out at start, then one every interval, never two at once. A non-empty
 * renewed token replaces the bearer for every later call; an empty one is "no renewal this
 * time". A failed beat is transient by design: the agent-lost reaper, not the agent, decides
 * when silence is fatal.
 */
export class HeartbeatLoop {
  #timer: unknown;
  #inFlight = false;
  #stopped = false;

  constructor(private readonly o: HeartbeatLoopOptions) {}

  start(): void {
    this.#beat();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) this.o.timers.clear(this.#timer);
  }

  #beat(): void {
    if (this.#stopped) return;
    this.#timer = this.o.timers.set(() => this.#beat(), this.o.intervalMs);
    if (this.#inFlight) return;
    this.#inFlight = true;
    this.o
      .send(this.o.timers.now())
      .then(
        (res) => {
          if (this.#stopped) return;
          if (res.renewedToken !== '' && this.o.tokens.swap(res.renewedToken)) {
            this.o.log('info', 'bearer token renewed');
          }
          if (res.shouldTerminate)
            this.o.onTerminate(res.terminateReason || 'attempt is no longer live');
        },
        (err: unknown) => {
          this.o.log('warn', `heartbeat failed (${codeName(err)}); continuing`);
        },
      )
      .finally(() => {
        this.#inFlight = false;
      });
  }
}
