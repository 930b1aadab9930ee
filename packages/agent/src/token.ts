import { randomBytes } from 'node:crypto';
import { fstatSync, readFileSync, closeSync } from 'node:fs';
import { Socket } from 'node:net';

/**
 * The per-attempt bearer. It lives only in this object: never in env, argv, files or logs.
 * A swap is a single reference assignment, so every call that starts after a renewal carries
 * the new token and no call can see half of one.
 */
export class TokenHolder {
  #token: string;
  /**
   * A random key of this agent process, bound to the attempt at Register. Past the token's exp
   * the server accepts Heartbeat/ReportState/PushLogs/PushXCom only with it, so a copy of an
   * expired token alone cannot report for the attempt. Like the token, never exported to the task.
   */
  readonly sessionKey: string = randomBytes(32).toString('base64url');

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

/** Why the token could not be read; `empty` is what a standby agent waits out. */
export type TokenReadReason = 'empty' | 'unreadable' | 'invalid';

export class TokenReadError extends Error {
  constructor(
    message: string,
    readonly reason: TokenReadReason = 'invalid',
  ) {
    super(message);
    this.name = 'TokenReadError';
  }
}

/**
 * What fd 3 may carry: a bare token, or an assignment whose spec (a task's script source
 * included) the executor keeps under 512 KiB encoded. Anything larger is a wiring mistake.
 */
const MAX_PIPE_BYTES = 1024 * 1024;

/**
 * Reads the inherited token pipe (a bare token or an assignment, see assignment.ts) up to its
 * first newline, or to EOF when none comes, and closes it. The subprocess executor ends its
 * write with a newline (JSON.stringify never emits one), so the agent starts on the message
 * itself instead of waiting for the executor's event loop to get round to closing its end —
 * milliseconds on the hand-off of every standby agent. The descriptor must be closed before the
 * task is spawned: an inherited fd 3 has no close-on-exec flag, so a task would otherwise
 * inherit the pipe.
 *
 * Pipes are read through a net.Socket (event loop, non-blocking) rather than fs: a blocking read
 * parked in the thread pool cannot be cancelled and would keep the process from exiting when the
 * executor never closes its end.
 */
export async function readTokenFromFd(fd: number, timeoutMs: number): Promise<string> {
  let raw: Buffer;
  let isStream: boolean;
  try {
    const st = fstatSync(fd);
    isStream = st.isFIFO() || st.isSocket();
  } catch (e) {
    throw new TokenReadError(
      `token pipe (fd ${fd}) unreadable: ${(e as NodeJS.ErrnoException).code ?? String(e)}`,
    );
  }
  if (isStream) {
    raw = await readStreamFd(fd, timeoutMs);
  } else {
    // A regular file (or /dev/null) on fd 3: not the contract, but harmless to accept.
    try {
      raw = readFileSync(fd);
    } finally {
      closeSync(fd);
    }
    if (raw.length > MAX_PIPE_BYTES) {
      throw new TokenReadError(`token pipe (fd ${fd}) carried more than ${MAX_PIPE_BYTES} bytes`);
    }
  }
  // The message ends at its first newline (after any leading whitespace); nothing after it is read.
  const text = raw.toString('utf8').trimStart();
  const end = text.indexOf('\n');
  const token = (end >= 0 ? text.slice(0, end) : text).trim();
  raw.fill(0);
  if (token === '') throw new TokenReadError(`token pipe (fd ${fd}) was empty`, 'empty');
  return token;
}

const NEWLINE = 0x0a;

function readStreamFd(fd: number, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const sock = new Socket({ fd, readable: true, writable: false, allowHalfOpen: true });
    const finish = (err: Error | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // Resolve only once the descriptor is really closed, so a spawn that follows cannot
      // inherit it.
      const settle = (): void => (err ? reject(err) : resolve(Buffer.concat(chunks)));
      if (sock.closed) settle();
      else sock.once('close', settle);
      sock.destroy();
    };
    const timer = setTimeout(
      () =>
        finish(
          new TokenReadError(
            `token pipe (fd ${fd}) not closed by the executor within ${timeoutMs} ms`,
          ),
        ),
      timeoutMs,
    );
    sock.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_PIPE_BYTES) {
        finish(
          new TokenReadError(`token pipe (fd ${fd}) carried more than ${MAX_PIPE_BYTES} bytes`),
        );
        return;
      }
      chunks.push(chunk);
      // The message is complete; whatever else the pipe might carry is not read.
      if (chunk.includes(NEWLINE)) finish(undefined);
    });
    sock.on('error', (e: NodeJS.ErrnoException) =>
      finish(
        new TokenReadError(
          `token pipe (fd ${fd}) unreadable: ${e.code ?? e.message}`,
          'unreadable',
        ),
      ),
    );
    sock.on('end', () => finish(undefined));
  });
}

/** The env variable the Kubernetes executor's envvar transport sets on the pod. */
export const AGENT_TOKEN_ENV = 'LEOFLOW_AGENT_TOKEN';

/**
 * Takes the envvar transport's token out of `env` (deleting it, so no child inherits it) and
 * returns it trimmed; undefined when the variable is absent or empty (the fd 3 pipe then).
 */
export function takeEnvToken(env: Record<string, string | undefined>): string | undefined {
  const raw = env[AGENT_TOKEN_ENV];
  delete env[AGENT_TOKEN_ENV];
  const token = raw?.trim();
  return token ? token : undefined;
}
