import { createReadStream } from 'node:fs';

/**
 * The per-attempt bearer. It lives only in this object: never in env, argv, files or logs.
 * A swap is a single reference assignment, so every call that starts after a renewal carries
 * the new token and no call can see half of one.
 */
export class TokenHolder {
  #token: string;

  constructor(initial: string) {
    if (initial === '') throw new Error('empty token');
    this.#token = initial;
  }

  current(): string {
    return this.#token;
  }

  /** An empty renewal is the server saying "no renewal this time" (e.g. past the ceiling). */
  swap(next: string): boolean {
    const t = next.trim();
    if (t === '') return false;
    this.#token = t;
    return true;
  }

  // Keep the value out of accidental JSON/inspect dumps of objects that hold the holder.
  toJSON(): string {
    return '[token]';
  }
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return 'TokenHolder([token])';
  }
}

export class TokenReadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenReadError';
  }
}

/** A JWT is a few KiB; anything much larger is a wiring mistake, not a token. */
const MAX_TOKEN_BYTES = 64 * 1024;

/**
 * Reads the inherited token pipe to EOF and closes it. The descriptor must be closed before the
 * task is spawned: an inherited fd 3 has no close-on-exec flag, so a task would otherwise
 * inherit the pipe.
 */
export function readTokenFromFd(fd: number, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const stream = createReadStream('', { fd, autoClose: true });
    const finish = (err: Error | undefined, value?: string, waitForClose = true): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const settle = (): void => (err ? reject(err) : resolve(value ?? ''));
      stream.destroy();
      // Resolve only once the descriptor is really closed, so a spawn that follows cannot
      // inherit it. A timed-out read is stuck in the thread pool and would never let the close
      // finish; the agent exits in that case anyway.
      if (!waitForClose || stream.closed) settle();
      else stream.once('close', settle);
    };
    const timer = setTimeout(
      () =>
        finish(
          new TokenReadError(`token pipe (fd ${fd}) not closed by the executor within ${timeoutMs} ms`),
          undefined,
          false,
        ),
      timeoutMs,
    );
    stream.on('data', (chunk: Buffer | string) => {
      const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      size += b.length;
      if (size > MAX_TOKEN_BYTES) {
        finish(new TokenReadError(`token pipe (fd ${fd}) carried more than ${MAX_TOKEN_BYTES} bytes`));
        return;
      }
      chunks.push(b);
    });
    stream.on('error', (e: NodeJS.ErrnoException) =>
      finish(new TokenReadError(`token pipe (fd ${fd}) unreadable: ${e.code ?? e.message}`)),
    );
    stream.on('end', () => {
      const token = Buffer.concat(chunks).toString('utf8').trim();
      chunks.length = 0;
      if (token === '') finish(new TokenReadError(`token pipe (fd ${fd}) was empty`));
      else finish(undefined, token);
    });
  });
}
