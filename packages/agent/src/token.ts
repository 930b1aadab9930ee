import { randomBytes } from 'node:crypto';
import { TokenPipe } from './token-pipe.js';
import { TokenReadError } from './token-read-error.js';

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
  #sessionKey: string = randomBytes(32).toString('base64url');
  #sessionKeyAdopted = false;

  constructor(initial: string) {
    if (initial === '') throw new Error('empty token');
    this.#token = initial;
  }

  get sessionKey(): string {
    return this.#sessionKey;
  }

  /**
   * The key an executor bound for this agent when it registered the attempt at hand-off (a
   * standby agent's assignment carries it). Once, before any call that carries the token.
   */
  adoptSessionKey(key: string): void {
    if (this.#sessionKeyAdopted) throw new Error('the session key was already adopted');
    if (key === '') throw new Error('empty session key');
    this.#sessionKey = key;
    this.#sessionKeyAdopted = true;
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

export { TokenReadError, type TokenReadReason } from './token-read-error.js';

/**
 * Reads the inherited token pipe (a bare token or an assignment, see assignment.ts) up to its
 * first newline, or to EOF when none comes, and closes it (token-pipe.ts; the subprocess
 * executor's standby hand-off reads a second message and uses TokenPipe itself).
 */
export async function readTokenFromFd(fd: number, timeoutMs: number): Promise<string> {
  const pipe = new TokenPipe(fd);
  try {
    const message = await pipe.next(timeoutMs);
    if (message === undefined) throw new TokenReadError(`token pipe (fd ${fd}) was empty`, 'empty');
    return message;
  } finally {
    await pipe.close();
  }
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
