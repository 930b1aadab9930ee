import { formatConnectionUri, SecretMasker } from '@leoflow/core';
import type { Logger } from 'pino';
import type { AgentTokenClaims } from '../auth/agent-token.js';
import type { AttemptRecordStore } from '../store/ports/attempt-records.js';
import type { SecretSource } from './secret-delivery.js';

/**
 * The control plane's second masking pass (issue 34): an agent that does not say it masks
 * (RegisterRequest.masks_secrets — one older than this build) has its log lines and XCom values
 * masked on write, with the same masker (@leoflow/core SecretMasker) built from the values its
 * attempt was delivered (the names in its delivery record, the values as the vault holds them
 * now). One masker per attempt and replica, built on the first write that needs it.
 */
export interface OutputMaskingDeps {
  store: Pick<AttemptRecordStore, 'getAttemptRecord'>;
  vault: SecretSource;
  logger: Logger;
  /** attempts remembered per replica (default 1,000); the oldest is rebuilt when needed again */
  cacheSize?: number;
}

export class OutputMasking {
  readonly #deps: OutputMaskingDeps;
  readonly #cache = new Map<string, Promise<SecretMasker>>();
  /** occurrences masked on write (agents that do not mask), for tests and metrics */
  masked = 0;

  constructor(deps: OutputMaskingDeps) {
    this.#deps = deps;
  }

  /** The attempt's masker (an empty one when nothing was delivered). */
  maskerFor(claims: AgentTokenClaims): Promise<SecretMasker> {
    const key = `${claims.task_instance_id}\u0000${claims.try_number}`;
    let m = this.#cache.get(key);
    if (m === undefined) {
      if (this.#cache.size >= (this.#deps.cacheSize ?? 1_000)) {
        const oldest = this.#cache.keys().next();
        if (!oldest.done) this.#cache.delete(oldest.value);
      }
      m = this.#build(claims);
      // a failed build is not remembered: the next write tries again
      m.catch(() => this.#cache.delete(key));
      this.#cache.set(key, m);
    }
    return m;
  }

  /** Masks each text; counts what it masked. */
  async mask(claims: AgentTokenClaims, texts: readonly string[]): Promise<string[]> {
    const masker = await this.maskerFor(claims);
    if (masker.patterns === 0) return [...texts];
    const before = masker.masked;
    const out = texts.map((t) => masker.mask(t));
    const n = masker.masked - before;
    if (n > 0) {
      this.masked += n;
      this.#deps.logger.warn(
        { task_instance_id: claims.task_instance_id, try_number: claims.try_number, masked: n },
        "masked delivered secret values on write (the attempt's agent does not mask its output)",
      );
    }
    return out;
  }

  async #build(claims: AgentTokenClaims): Promise<SecretMasker> {
    const rec = await this.#deps.store.getAttemptRecord(claims.task_instance_id, claims.try_number);
    const variables = rec?.variables_delivered ?? [];
    const connectionIds = rec?.connections_delivered ?? [];
    const [vars, conns] = await Promise.all([
      this.#deps.vault.resolveVariables(claims.tenant_id, variables),
      this.#deps.vault.resolveConnections(claims.tenant_id, connectionIds),
    ]);
    return SecretMasker.forDelivery({
      variables: Object.fromEntries(vars),
      connections: Object.fromEntries(
        [...conns].map(([id, c]) => [id, formatConnectionUri(c)] as const),
      ),
    });
  }
}
