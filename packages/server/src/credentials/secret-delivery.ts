import {
  declaredSet,
  formatConnectionUri,
  isNarrowerThanVault,
  livenessVerdict,
  planScope,
  type Clock,
  type Connection,
  type SecretKind,
  type SecretLivenessMode,
  type SecretScopingMode,
} from '@leoflow/core';
import type { Logger } from 'pino';
import type { AgentTokenClaims } from '../auth/agent-token.js';
import type { SpecCache } from '../scheduler/spec-cache.js';
import type { Store } from '../store/store.js';

/** The part of the vault delivery needs: decryption happens only for what is returned. */
export interface SecretSource {
  resolveVariables(tenantId: string, keys: readonly string[] | 'all'): Promise<Map<string, string>>;
  resolveConnections(
    tenantId: string,
    ids: readonly string[] | 'all',
  ): Promise<Map<string, Connection>>;
}

export interface SecretMetrics {
  delivered(kind: SecretKind): void;
  denied(kind: SecretKind, reason: 'not_live' | 'revoked' | 'insecure_channel'): void;
  wouldDeny(kind: SecretKind): void;
  latency(kind: SecretKind, seconds: number): void;
}

export const NO_METRICS: SecretMetrics = {
  delivered: () => undefined,
  denied: () => undefined,
  wouldDeny: () => undefined,
  latency: () => undefined,
};

export interface SecretDeliveryOptions {
  store: Store;
  vault: SecretSource;
  specs: SpecCache;
  clock: Clock;
  logger: Logger;
  scoping: SecretScopingMode;
  liveness: SecretLivenessMode;
  /** false when the agent channel is cleartext on a non-loopback address */
  channelSecure: boolean;
  metrics?: SecretMetrics;
}

/** A refusal the RPC layer turns into PermissionDenied; its message is safe to show. */
export class SecretRefusal extends Error {
  constructor(
    message: string,
    readonly reason: 'not_live' | 'revoked' | 'insecure_channel',
  ) {
    super(message);
  }
}

/**
 * GetVariables / GetConnections. Order: channel guard → liveness gate → declared set → scoped
 * read → decrypt only what is returned. The caller's identity comes from its verified token;
 * nothing in the request names what it wants.
 */
export class SecretDelivery {
  private readonly metrics: SecretMetrics;

  constructor(private readonly o: SecretDeliveryOptions) {
    this.metrics = o.metrics ?? NO_METRICS;
  }

  async variables(claims: AgentTokenClaims): Promise<Record<string, string>> {
    const values = await this.deliver(claims, 'variables', (names) =>
      this.o.vault.resolveVariables(claims.tenant_id, names),
    );
    return Object.fromEntries(values);
  }

  async connections(claims: AgentTokenClaims): Promise<Record<string, string>> {
    const conns = await this.deliver(claims, 'connections', (ids) =>
      this.o.vault.resolveConnections(claims.tenant_id, ids),
    );
    const out: Record<string, string> = {};
    for (const [id, conn] of conns) out[id] = formatConnectionUri(conn);
    return out;
  }

  private async deliver<T>(
    claims: AgentTokenClaims,
    kind: SecretKind,
    read: (names: readonly string[] | 'all') => Promise<Map<string, T>>,
  ): Promise<Map<string, T>> {
    const started = performance.now();
    try {
      if (!this.o.channelSecure) {
        this.metrics.denied(kind, 'insecure_channel');
        throw new SecretRefusal(
          'refusing to send secrets over a cleartext agent channel; configure agent TLS (--agent-tls-cert/--agent-tls-key)',
          'insecure_channel',
        );
      }
      await this.gate(claims, kind);

      const run = await this.o.store.getRunSpecRef(claims.dag_run_id);
      if (!run) throw new SecretRefusal('task instance is no longer live', 'not_live');
      const spec = await this.o.specs.get(run.tenant_id, run.dag_id, run.dag_version);
      const declared = declaredSet(spec, claims.task_id, kind);
      const plan = planScope(this.o.scoping, declared);

      let result: Map<string, T>;
      if (plan.read === 'nothing') {
        result = new Map();
      } else if (plan.read === 'declared') {
        result = await read(plan.names);
      } else {
        result = await read('all');
        if (plan.warnWhenNarrower && isNarrowerThanVault(declared, new Set(result.keys()))) {
          this.o.logger.warn(
            { kind, dag_id: claims.dag_id, task_id: claims.task_id },
            'task receives vault entries it did not declare (secret_scoping=permissive); declare them or switch to enforce',
          );
          await this.audit(claims, 'secret.scope_warning', {
            kind,
            declared: declared.length,
            total: result.size,
          });
        }
      }
      this.metrics.delivered(kind);
      return result;
    } finally {
      this.metrics.latency(kind, (performance.now() - started) / 1000);
    }
  }

  private async gate(claims: AgentTokenClaims, kind: SecretKind): Promise<void> {
    let liveness: { live: boolean; revoked: boolean } | undefined;
    try {
      liveness = await this.o.store.getAttemptLiveness(
        claims.dag_run_id,
        claims.task_id,
        claims.try_number,
        claims.dispatch_gen,
      );
    } catch (err) {
      // Inconclusive: deliver. The short token lifetime bounds what a blip can leak.
      this.o.logger.warn(
        { err, kind },
        'liveness read failed; delivering (deny only on a positive not-live)',
      );
      liveness = undefined;
    }
    const verdict = livenessVerdict(this.o.liveness, liveness);
    if (verdict.kind === 'deliver') return;
    if (verdict.kind === 'deliver_would_deny') {
      this.metrics.wouldDeny(kind);
      this.o.logger.warn(
        { kind, dag_id: claims.dag_id, task_id: claims.task_id, try: claims.try_number },
        'secrets delivered to an attempt that is no longer live (secret_liveness_mode=observe would deny under enforce)',
      );
      await this.audit(claims, 'secret.liveness_would_deny', { kind, mode: 'observe' });
      return;
    }
    this.metrics.denied(kind, verdict.reason);
    if (verdict.reason === 'revoked') {
      await this.audit(claims, 'secret.revoked_denied', { kind });
      throw new SecretRefusal('the credential of this attempt was revoked', 'revoked');
    }
    await this.audit(claims, 'secret.liveness_denied', { kind, mode: 'enforce' });
    throw new SecretRefusal('task instance is no longer live', 'not_live');
  }

  /** Best-effort: an audit failure never changes the answer. Never names or values. */
  private async audit(
    claims: AgentTokenClaims,
    action: string,
    payload: Record<string, unknown>,
  ): Promise<void> {
    try {
      await this.o.store.appendAudit({
        tenant_id: claims.tenant_id,
        at: this.o.clock.now(),
        actor: `agent:${claims.task_instance_id}#${claims.try_number}`,
        action,
        resource_type: 'dag',
        resource_id: claims.dag_id,
        request_id: null,
        payload: {
          ...payload,
          run_id: claims.run_id,
          task_id: claims.task_id,
          try_number: claims.try_number,
        },
      });
    } catch (err) {
      this.o.logger.warn({ err, action }, 'audit write failed');
    }
  }
}

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\./.test(host);
}
