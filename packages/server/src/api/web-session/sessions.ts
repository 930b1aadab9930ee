import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '@leoflow/core';
import type { UserPrincipal } from '../../auth/user-token.js';
import type { UiSessionStore } from '../../store/ports/ui-sessions.js';

/** How long a browser session lives (it also ends when its API token is revoked or expires). */
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/** How long a one-time sign-in code (standalone's sign-in URL) stays usable. */
export const DEFAULT_SIGN_IN_CODE_TTL_MS = 10 * 60 * 1000;

interface HeldCode {
  /** the API token the code signs in as; it never leaves the server */
  token: string;
  expiresAt: number;
}

/** The store key of a cookie value or code: its SHA-256, so a database dump hands out nothing. */
export const sessionDigest = (secret: string) =>
  createHash('sha256').update(secret).digest('base64url');
const mint = () => randomBytes(32).toString('base64url');

/**
 * Browser sessions, in the store (a restart keeps browsers signed in), and one-time sign-in
 * codes, in memory (a restart prints a new link and the old one is dead). Only digests of the
 * cookie values and codes are kept. A session names its API token by jti, never the token;
 * the caller re-checks that token's record on every request (ApiTokens.stillOnRecord), so
 * revoking the token ends the session too, and a session never outlives the token's expiry.
 */
export class UiSessions {
  private readonly codes = new Map<string, HeldCode>();

  constructor(
    private readonly store: UiSessionStore,
    private readonly clock: Clock,
    private readonly ttl = {
      sessionMs: DEFAULT_SESSION_TTL_MS,
      codeMs: DEFAULT_SIGN_IN_CODE_TTL_MS,
    },
  ) {}

  /**
   * A new session for a principal whose token the caller has just authenticated; it ends at
   * the session TTL or the token's own expiry (`tokenExpiresAt`, epoch ms), whichever is first.
   */
  async open(
    principal: UserPrincipal,
    tokenExpiresAt: number | null,
  ): Promise<{ id: string; expiresAt: number; maxAgeMs: number }> {
    const now = this.clock.now();
    await this.sweep();
    const id = mint();
    const expiresAt = Math.min(now + this.ttl.sessionMs, tokenExpiresAt ?? Infinity);
    await this.store.insertUiSession({
      id_hash: sessionDigest(id),
      tenant_id: principal.tenant_id,
      token_jti: principal.jti,
      subject: principal.subject,
      role: principal.role,
      created_at: now,
      expires_at: expiresAt,
    });
    return { id, expiresAt, maxAgeMs: expiresAt - now };
  }

  /**
   * Who a live session acts as, or null (unknown, expired or signed out). The caller still
   * checks the token's record (ApiTokens.stillOnRecord).
   */
  async principalOf(id: string): Promise<UserPrincipal | null> {
    const key = sessionDigest(id);
    const row = await this.store.getUiSession(key);
    if (!row) return null;
    if (this.clock.now() >= row.expires_at) {
      await this.store.deleteUiSession(key);
      return null;
    }
    return { subject: row.subject, tenant_id: row.tenant_id, role: row.role, jti: row.token_jti };
  }

  /** Sign-out: the row goes, so the cookie is dead even if a copy of it survives. */
  close(id: string): Promise<boolean> {
    return this.store.deleteUiSession(sessionDigest(id));
  }

  /** Removes expired sessions (every sign-in does this first); how many went. */
  async sweep(): Promise<number> {
    const now = this.clock.now();
    for (const [k, v] of this.codes) if (now >= v.expiresAt) this.codes.delete(k);
    return this.store.deleteExpiredUiSessions(now);
  }

  /** A single-use, short-lived code that signs a browser in as `token` (standalone's URL). */
  mintSignInCode(token: string): string {
    const now = this.clock.now();
    for (const [k, v] of this.codes) if (now >= v.expiresAt) this.codes.delete(k);
    const code = mint();
    this.codes.set(sessionDigest(code), { token, expiresAt: now + this.ttl.codeMs });
    return code;
  }

  /** Spends a code: the token it stands for, or null. A code works once, however it ends. */
  redeem(code: string): string | null {
    const key = sessionDigest(code);
    const held = this.codes.get(key);
    this.codes.delete(key);
    if (!held || this.clock.now() >= held.expiresAt) return null;
    return held.token;
  }
}
