import { closeSync, fstatSync, readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { TokenReadError } from './token-read-error.js';

/**
 * What fd 3 may carry in all: a bare token, or an assignment whose spec (a task's script source
 * included) the executor keeps under 512 KiB encoded, and the registration that may follow it.
 * Anything larger is a wiring mistake.
 */
export const MAX_PIPE_BYTES = 1024 * 1024;

const NEWLINE = 0x0a;

/**
 * The inherited token pipe, read message by message: each message ends at a newline (the
 * executor ends every write with one, so the agent acts on a message as soon as it arrives
 * instead of waiting for the executor to close its end), the last one possibly at EOF. The
 * subprocess executor writes one message (the assignment) or two (the assignment, then the
 * registration it made for this agent; docs/agent.md, "Standby agents").
 *
 * Pipes are read through a net.Socket (event loop, non-blocking) rather than fs: a blocking read
 * parked in the thread pool cannot be cancelled and would keep the process from exiting when the
 * executor never closes its end. The descriptor must be closed (close()) before the task is
 * spawned: an inherited fd 3 has no close-on-exec flag, so a task would otherwise inherit it.
 */
export class TokenPipe {
  readonly #fd: number;
  /** a regular file (or /dev/null) on fd 3: not the contract, but harmless to accept */
  #file: Buffer | undefined;
  #sock: Socket | undefined;
  #buffered: Buffer = Buffer.alloc(0);
  #received = 0;
  #ended = false;
  #error: TokenReadError | undefined;
  #wake: (() => void) | undefined;

  constructor(fd: number) {
    this.#fd = fd;
    let isStream: boolean;
    try {
      const st = fstatSync(fd);
      isStream = st.isFIFO() || st.isSocket();
    } catch (e) {
      throw new TokenReadError(
        `token pipe (fd ${fd}) unreadable: ${(e as NodeJS.ErrnoException).code ?? String(e)}`,
      );
    }
    if (!isStream) {
      try {
        this.#file = readFileSync(fd);
      } finally {
        closeSync(fd);
      }
      this.#ended = true;
      this.#take(this.#file);
      return;
    }
    const sock = new Socket({ fd, readable: true, writable: false, allowHalfOpen: true });
    this.#sock = sock;
    sock.on('data', (chunk: Buffer) => this.#take(chunk));
    sock.on('end', () => {
      this.#ended = true;
      this.#notify();
    });
    sock.on('error', (e: NodeJS.ErrnoException) => {
      this.#error ??= new TokenReadError(
        `token pipe (fd ${fd}) unreadable: ${e.code ?? e.message}`,
        'unreadable',
      );
      this.#notify();
    });
  }

  /**
   * The next message, without its newline and surrounding whitespace; undefined when the pipe
   * ended with nothing more. Waits at most `timeoutMs` for it.
   */
  async next(timeoutMs: number): Promise<string | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.#error) throw this.#error;
      const end = this.#buffered.indexOf(NEWLINE);
      if (end >= 0 || this.#ended) {
        const raw = end >= 0 ? this.#buffered.subarray(0, end) : this.#buffered;
        const text = raw.toString('utf8').trim();
        this.#buffered = end >= 0 ? this.#buffered.subarray(end + 1) : Buffer.alloc(0);
        raw.fill(0);
        // blank lines between messages (leading whitespace) are not messages
        if (text !== '') return text;
        if (this.#ended && this.#buffered.length === 0) return undefined;
        continue;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new TokenReadError(
          `token pipe (fd ${this.#fd}) not closed by the executor within ${timeoutMs} ms`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }

  /** Closes the descriptor; resolves once it is really closed, so a spawn cannot inherit it. */
  close(): Promise<void> {
    this.#buffered.fill(0);
    this.#buffered = Buffer.alloc(0);
    const sock = this.#sock;
    if (!sock || sock.closed) return Promise.resolve();
    return new Promise((resolve) => {
      sock.once('close', () => resolve());
      sock.destroy();
    });
  }

  #take(chunk: Buffer): void {
    this.#received += chunk.length;
    if (this.#received > MAX_PIPE_BYTES) {
      this.#error ??= new TokenReadError(
        `token pipe (fd ${this.#fd}) carried more than ${MAX_PIPE_BYTES} bytes`,
      );
    } else {
      const before = this.#buffered;
      this.#buffered = Buffer.concat([before, chunk]);
      // the copies are all that is kept: what they were made from holds no token after this
      before.fill(0);
      chunk.fill(0);
    }
    this.#notify();
  }

  #notify(): void {
    this.#wake?.();
  }
}
