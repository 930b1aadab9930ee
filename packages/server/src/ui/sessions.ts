import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '@leoflow/core';

/** How long a browser session lives (it also ends when its API token is revoked or expires). */
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/** How long a one-time sign-in code (standalone's sign-in URL) stays usable. */
export const DEFAULT_SIGN_IN_CODE_TTL_MS = 10 * 60 * 1000;

interface Held {
  /** the API token the browser exchanged; it never leaves the server again */
  token: string;
  expiresAt: number;
}

const digest = (secret: string) => createHash('sha256').update(secret).digest('base64url');
const mint = () => randomBytes(32).toString('base64url');

/**
 * Browser sessions and one-time sign-in codes, in memory: a restart signs every browser out.
 * Only digests of the session ids and codes are kept, so a heap dump does not hand out
 * sessions; the API token behind a session is re-authenticated on every request (so revoking
 * the token ends the session too).
 */
export class UiSessions {
  private readonly sessions = new Map<string, Held>();
  private readonly codes = new Map<string, Held>();

  constructor(
    private readonly clock: Clock,
    private readonly ttl = {
      sessionMs: DEFAULT_SESSION_TTL_MS,
      codeMs: DEFAULT_SIGN_IN_CODE_TTL_MS,
    },
  ) {}

  get sessionTtlMs(): number {
    return this.ttl.sessionMs;
  }

  /** A new session for an API token the caller has already authenticated. */
  open(token: string): { id: string; expiresAt: number } {
    this.sweep();
    const id = mint();
    const expiresAt = this.clock.now() + this.ttl.sessionMs;
    this.sessions.set(digest(id), { token, expiresAt });
    return { id, expiresAt };
  }

  /** The API token behind a live session, or null (unknown, expired or closed). */
  tokenOf(id: string): string | null {
    const key = digest(id);
    const held = this.sessions.get(key);
    if (!held) return null;
    if (this.clock.now() >= held.expiresAt) {
      this.sessions.delete(key);
      return null;
    }
    return held.token;
  }

  close(id: string): boolean {
    return this.sessions.delete(digest(id));
  }

  /** A single-use, short-lived code that signs a browser in as `token` (standalone's URL). */
  mintSignInCode(token: string): string {
    this.sweep();
    const code = mint();
    this.codes.set(digest(code), { token, expiresAt: this.clock.now() + this.ttl.codeMs });
    return code;
  }

  /** Spends a code: the token it stands for, or null. A code works once, however it ends. */
  redeem(code: string): string | null {
    const key = digest(code);
    const held = this.codes.get(key);
    this.codes.delete(key);
    if (!held || this.clock.now() >= held.expiresAt) return null;
    return held.token;
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const m of [this.sessions, this.codes]) {
      for (const [k, v] of m) if (now >= v.expiresAt) m.delete(k);
    }
  }
}
