import { Code } from '@connectrpc/connect';
import type { Diagnostics } from './diag.js';
import { codeName, errorCode, isRetryable, sleep } from './retry.js';

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
  /** most lines in one PushLogs */
  batchSize?: number;
  /** most UTF-8 message bytes in one PushLogs (the agent port caps a message at 4 MiB) */
  batchBytes?: number;
  /** buffered lines at which the task's output is paused (it resumes below half of it) */
  highWaterLines?: number;
  /** buffered message bytes at which the task's output is paused (resumes below half) */
  highWaterBytes?: number;
  /**
   * Called with true when the buffer passes a high-water mark (the agent stops reading the task's
   * stdout/stderr, so the task blocks in write()), and with false once it is below the low-water
   * mark again (or shipping has stopped for good).
   */
  onPressure?: (blocked: boolean) => void;
  now?: () => number;
}

/** Consecutive permanent refusals after which shipping stops (and the task is released). */
const MAX_PERMANENT_FAILURES = 10;

/**
 * Ships task output in order, in batches, and loses nothing by default: when the task writes
 * faster than the control plane stores (or the control plane is away), the buffer reaches its
 * high-water mark and the task's output is paused through onPressure — the task blocks on its
 * pipe instead of lines being dropped. Lines are discarded only once the control plane has
 * refused this attempt's log for good (e.g. the attempt ended long ago); the count goes to the
 * agent's diagnostics, since the log itself no longer accepts anything.
 */
export class LogShipper {
  readonly #push: (lines: BufferedLine[]) => Promise<void>;
  readonly #diag: Diagnostics;
  readonly #flushIntervalMs: number;
  readonly #batchSize: number;
  readonly #batchBytes: number;
  readonly #highLines: number;
  readonly #highBytes: number;
  readonly #onPressure: (blocked: boolean) => void;
  readonly #now: () => number;

  #buffer: BufferedLine[] = [];
  #sizes: number[] = [];
  #bufferedBytes = 0;
  #nextLine = 1;
  #blocked = false;
  #closed = false;
  #discarded = 0;
  #inFlight: Promise<boolean> | undefined;
  #again = false;
  #failures = 0;
  #permanentFailures = 0;
  #notBefore = 0;
  #lastError: unknown;
  #timer: NodeJS.Timeout | undefined;

  constructor(opts: LogShipperOptions) {
    this.#push = opts.push;
    this.#diag = opts.diag;
    this.#flushIntervalMs = opts.flushIntervalMs ?? 250;
    this.#batchSize = opts.batchSize ?? 2_000;
    this.#batchBytes = opts.batchBytes ?? 1024 * 1024;
    this.#highLines = opts.highWaterLines ?? 20_000;
    this.#highBytes = opts.highWaterBytes ?? 8 * 1024 * 1024;
    this.#onPressure = opts.onPressure ?? (() => undefined);
    this.#now = opts.now ?? Date.now;
  }

  get pending(): number {
    return this.#buffer.length;
  }

  /** Whether the task's output is currently paused by backpressure. */
  get blocked(): boolean {
    return this.#blocked;
  }

  /** Lines discarded after the control plane closed this attempt's log. */
  get discarded(): number {
    return this.#discarded;
  }

  add(stream: StreamName, message: string): void {
    const lineNumber = this.#nextLine++;
    if (this.#closed) {
      this.#discarded++;
      return;
    }
    const size = Buffer.byteLength(message, 'utf8');
    this.#buffer.push({ lineNumber, timeMs: this.#now(), stream, message });
    this.#sizes.push(size);
    this.#bufferedBytes += size;
    if (
      !this.#blocked &&
      (this.#buffer.length >= this.#highLines || this.#bufferedBytes >= this.#highBytes)
    ) {
      this.#setBlocked(true);
    }
    if (this.#timer !== undefined && this.#readyToSend()) void this.flush();
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
   * One push of at most batchSize lines / batchBytes bytes. Concurrent callers share the
   * in-flight push so lines are never sent twice or out of order. Resolves true when the push
   * succeeded (or there was nothing to send). While the shipper runs (start()), a successful push
   * is followed at once by the next one if a full batch is waiting or the task is blocked.
   */
  flush(): Promise<boolean> {
    if (this.#inFlight) return this.#inFlight;
    if (this.#closed) return Promise.resolve(false);
    if (this.#buffer.length === 0) return Promise.resolve(true);
    if (this.#now() < this.#notBefore) return Promise.resolve(false);
    let n = 0;
    let bytes = 0;
    while (n < this.#buffer.length && n < this.#batchSize) {
      const size = this.#sizes[n]!;
      if (n > 0 && bytes + size > this.#batchBytes) break;
      bytes += size;
      n++;
    }
    const batch = this.#buffer.slice(0, n);
    this.#inFlight = this.#push(batch).then(
      () => {
        this.#buffer.splice(0, n);
        this.#sizes.splice(0, n);
        this.#bufferedBytes -= bytes;
        if (this.#failures > 0)
          this.#diag.log('info', `log shipping resumed after ${this.#failures} failed pushes`);
        this.#failures = 0;
        this.#permanentFailures = 0;
        this.#notBefore = 0;
        this.#lastError = undefined;
        if (
          this.#blocked &&
          this.#buffer.length < this.#highLines / 2 &&
          this.#bufferedBytes < this.#highBytes / 2
        ) {
          this.#setBlocked(false);
        }
        this.#again = this.#timer !== undefined && (this.#blocked || this.#readyToSend());
        return true;
      },
      (err: unknown) => {
        this.#failures++;
        this.#lastError = err;
        this.#notBefore = this.#now() + Math.min(250 * 2 ** Math.min(this.#failures - 1, 5), 5_000);
        if (!isRetryable(err)) this.#permanentFailures++;
        if (
          errorCode(err) === Code.FailedPrecondition ||
          this.#permanentFailures >= MAX_PERMANENT_FAILURES
        ) {
          this.#close(err);
          return false;
        }
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
      if (this.#again) {
        this.#again = false;
        void this.flush();
      }
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
      if (this.#closed) return false;
      if (this.#buffer.length === 0 && !this.#inFlight) return true;
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
    return !this.#closed && this.#buffer.length === 0;
  }

  #readyToSend(): boolean {
    return this.#buffer.length >= this.#batchSize || this.#bufferedBytes >= this.#batchBytes;
  }

  #setBlocked(blocked: boolean): void {
    this.#blocked = blocked;
    this.#onPressure(blocked);
  }

  /** The control plane refused this attempt's log for good: drop what is held, free the task. */
  #close(err: unknown): void {
    this.#closed = true;
    this.#discarded += this.#buffer.length;
    this.#buffer = [];
    this.#sizes = [];
    this.#bufferedBytes = 0;
    this.stop();
    if (this.#blocked) this.#setBlocked(false);
    this.#diag.log(
      'warn',
      `PushLogs refused (${codeName(err)}): the control plane no longer accepts this attempt's ` +
        `log; ${this.#discarded} lines not stored, later lines are counted and discarded`,
    );
  }
}
