import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '@leoflow/core';

/** How long a per-connection secret is good for: one connection attempt, not a session. */
export const CONNECTION_SECRET_TTL_MS = 30_000;
/** Outstanding secrets a cell keeps at most; beyond it the oldest are dropped (a flood of fetches). */
const MAX_OUTSTANDING = 10_000;

export interface ConnectionGrant {
  runner_id: string;
  tenant_id: string;
}

/**
 * The cell's per-connection secrets: minted for the door on every connection attempt, bound
 * to one runner, single-use, valid CONNECTION_SECRET_TTL_MS. Kept in this process's memory,
 * by SHA-256, so a cell replica that did not mint a secret refuses it (docs/runners.md: several
 * replicas behind one cell URL need sticky routing; not built).
 */
export class ConnectionSecrets {
  readonly #byHash = new Map<string, ConnectionGrant & { expires_at: number }>();

  constructor(private readonly clock: Clock) {}

  mint(grant: ConnectionGrant): { secret: string; expires_at: number } {
    this.#sweep();
    const secret = randomBytes(32).toString('base64url');
    const expires_at = this.clock.now() + CONNECTION_SECRET_TTL_MS;
    this.#byHash.set(hash(secret), { ...grant, expires_at });
    while (this.#byHash.size > MAX_OUTSTANDING) {
      const oldest = this.#byHash.keys().next().value;
      if (oldest === undefined) break;
      this.#byHash.delete(oldest);
    }
    return { secret, expires_at };
  }

  /** The grant, once: the secret is gone after this whether or not it was still valid. */
  consume(secret: string): ConnectionGrant | undefined {
    const key = hash(secret);
    const grant = this.#byHash.get(key);
    if (!grant) return undefined;
    this.#byHash.delete(key);
    if (this.clock.now() >= grant.expires_at) return undefined;
    return { runner_id: grant.runner_id, tenant_id: grant.tenant_id };
  }

  get outstanding(): number {
    return this.#byHash.size;
  }

  #sweep(): void {
    const now = this.clock.now();
    for (const [k, g] of this.#byHash) if (now >= g.expires_at) this.#byHash.delete(k);
  }
}

function hash(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}
