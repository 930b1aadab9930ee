import type { Diagnostics } from './diag.js';
import { codeName, isRetryable, sleep } from './retry.js';

export type StreamName = 'stdout' | 'stderr' | 'agent';

export interface BufferedLine {
  lineNumber: number;
  timeMs: number;
  stream: StreamName;
  message: string;
}

export interface LogShipperOptions {
  push: (lines: BufferedLine[]) => Promise<void>;
  diag: Diagnostics;
  flushIntervalMs?: number;
  batchSize?: number;
  maxBuffered?: number;
  now?: () => number;
}

/**
 * Ships task output in order, in batches, and survives a control plane that is briefly away:
 * lines stay buffered until a push succeeds. The buffer is bounded so a chatty task cannot
 * exhaust the agent's memory during a long outage; the oldest lines go first and the loss is
 * itself reported as an 'agent' line once the server is back.
 */
export class LogShipper {
  readonly #push: (lines: BufferedLine[]) => Promise<void>;
  readonly #diag: Diagnostics;
  readonly #flushIntervalMs: number;
  readonly #batchSize: number;
  readonly #maxBuffered: number;
  readonly #now: () => number;

  #buffer: BufferedLine[] = [];
  #nextLine = 1;
  #droppedUnreported = 0;
  #droppedTotal = 0;
  #inFlight: Promise<boolean> | undefined;
  #failures = 0;
  #notBefore = 0;
  #lastError: unknown;
  #timer: NodeJS.Timeout | undefined;

  constructor(opts: LogShipperOptions) {
    this.#push = opts.push;
    this.#diag = opts.diag;
    this.#flushIntervalMs = opts.flushIntervalMs ?? 250;
    this.#batchSize = opts.batchSize ?? 500;
    this.#maxBuffered = opts.maxBuffered ?? 10_000;
    this.#now = opts.now ?? Date.now;
  }

  get pending(): number {
    return this.#buffer.length;
  }

  get droppedTotal(): number {
    return this.#droppedTotal;
  }

  add(stream: StreamName, message: string): void {
    this.#buffer.push({ lineNumber: this.#nextLine++, timeMs: this.#now(), stream, message });
    if (this.#buffer.length > this.#maxBuffered) {
      const excess = this.#buffer.length - this.#maxBuffered;
      this.#buffer.splice(0, excess);
      this.#droppedUnreported += excess;
      this.#droppedTotal += excess;
    }
    if (this.#buffer.length >= this.#batchSize && this.#timer !== undefined) void this.flush();
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.flush(), this.#flushIntervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /**
   * One push of at most batchSize lines. Concurrent callers share the in-flight push so lines
   * are never sent twice or out of order. Resolves true when the push succeeded (or there was
   * nothing to send).
   */
  flush(): Promise<boolean> {
    if (this.#inFlight) return this.#inFlight;
    if (this.#buffer.length === 0) return Promise.resolve(true);
    if (this.#now() < this.#notBefore) return Promise.resolve(false);
    const batch = this.#buffer.slice(0, this.#batchSize);
    const last = batch[batch.length - 1]!.lineNumber;
    this.#inFlight = this.#push(batch).then(
      () => {
        // Drops may have removed the head while the push was in flight; remove by number.
        let i = 0;
        while (i < this.#buffer.length && this.#buffer[i]!.lineNumber <= last) i++;
        this.#buffer.splice(0, i);
        if (this.#failures > 0)
          this.#diag.log('info', `log shipping resumed after ${this.#failures} failed pushes`);
        this.#failures = 0;
        this.#notBefore = 0;
        this.#lastError = undefined;
        if (this.#droppedUnreported > 0) {
          const n = this.#droppedUnreported;
          this.#droppedUnreported = 0;
          const msg = `${n} log lines dropped: the log service was unavailable and the agent buffer (${this.#maxBuffered} lines) was full`;
          this.#diag.log('warn', msg);
          this.add('agent', msg);
        }
        return true;
      },
      (err: unknown) => {
        this.#failures++;
        this.#lastError = err;
        this.#notBefore = this.#now() + Math.min(250 * 2 ** Math.min(this.#failures - 1, 5), 5_000);
        if (this.#failures === 1 || this.#failures % 20 === 0) {
          this.#diag.log(
            'warn',
            `PushLogs failed (${codeName(err)}), ${this.#buffer.length} lines buffered; retrying`,
          );
        }
        return false;
      },
    );
    const done = this.#inFlight;
    void done.finally(() => {
      if (this.#inFlight === done) this.#inFlight = undefined;
    });
    return done;
  }

  /**
   * Pushes everything buffered, retrying transient failures until the deadline (a function so a
   * signal can pull it in while draining). Gives up early on
   * a non-retryable code (the server will not change its mind) and reports what was left.
   */
  async drain(deadlineAt: number | (() => number)): Promise<boolean> {
    const deadlineOf = typeof deadlineAt === 'number' ? () => deadlineAt : deadlineAt;
    for (;;) {
      if (this.#buffer.length === 0) return true;
      const now = this.#now();
      const deadline = deadlineOf();
      if (now >= deadline) break;
      const wait = this.#notBefore - now;
      if (wait > 0) {
        await sleep(Math.min(wait, deadline - now));
        continue;
      }
      const ok = await this.flush();
      if (!ok && this.#lastError !== undefined && !isRetryable(this.#lastError)) break;
    }
    if (this.#buffer.length > 0) {
      this.#diag.log('warn', `gave up shipping ${this.#buffer.length} log lines`);
    }
    return this.#buffer.length === 0;
  }
}
