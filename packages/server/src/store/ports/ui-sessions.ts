import type { UiSessionRow } from '../types.js';

/** Web app sessions, by the digest of their cookie value (the value is never stored). */
export interface UiSessionStore {
  insertUiSession(row: UiSessionRow): Promise<void>;
  /** The session under this digest, expired or not (the caller judges expiry by its clock). */
  getUiSession(id_hash: string): Promise<UiSessionRow | undefined>;
  /** Sign-out; false when there was no such session. */
  deleteUiSession(id_hash: string): Promise<boolean>;
  /** Removes every session expired at `now`; how many went. */
  deleteExpiredUiSessions(now: number): Promise<number>;
}
