import {
  declaredSet,
  notGrantedMessage,
  SECRET_NOT_GRANTED_CODE,
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
import type { AttemptRecorder } from './attempt-record.js';
import type { GrantFilter } from '../vault/vault-service.js';
import type { SpecCache } from '../store/spec-cache.js';
import type { SecretPathStore } from '../store/ports/secret-path.js';

/**
 * The part of the vault delivery needs: decryption happens only for what is returned, and only
 * for what the grants give the DAG (the names of the others are pushed to `grants.ungranted`).
 */
export interface SecretSource {
  resolveVariables(
    tenantId: string,
    keys: readonly string[] | 'all',
    grants?: GrantFilter,
  ): Promise<Map<string, string>>;
  resolveConnections(
    tenantId: string,
    ids: readonly string[] | 'all',
    grants?: GrantFilter,
  ): Promise<Map<string, Connection>>;
}

export interface SecretMetrics {
  delivered(kind: SecretKind): void;
  denied(kind: SecretKind, reason: SecretRefusalReason): void;
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
  store: SecretPathStore;
  vault: SecretSource;
  specs: SpecCache;
  clock: Clock;
  logger: Logger;
  scoping: SecretScopingMode;
  liveness: SecretLivenessMode;
  /** false when the agent channel is cleartext on a non-loopback address */
  channelSecure: boolean;
  metrics?: SecretMetrics;
  /** the per-try delivery record (names, refusals); optional for callers that keep none */
  records?: AttemptRecorder;
}

export type SecretRefusalReason = 'not_live' | 'revoked' | 'insecure_channel' | 'not_granted';

/**
 * A refusal the RPC layer turns into PermissionDenied; its message is safe to show. `code`, when
 * set, travels in the `leoflow-error-code` metadata (and in Register's prefetch), so the agent
 * can act on the refusal without reading its text.
 */
export class SecretRefusal extends Error {
  constructor(
    message: string,
    readonly reason: SecretRefusalReason,
    readonly code?: typeof SECRET_NOT_GRANTED_CODE,
  ) {
    super(message);
  }
}

/**
 * The declaration could not be read (run or DAG version missing/unreadable) under
 * secret_scoping=enforce: neither a refusal nor an empty grant — the RPC layer answers
 * Unavailable so the agent may retry. Never raised under permissive/off, which deliver anyway.
 */
export class SecretUnavailable extends Error {}

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
    const values = await this.deliver(claims, 'variables', (names, grants) =>
      this.o.vault.resolveVariables(claims.tenant_id, names, grants),
    );
    return Object.fromEntries(values);
  }

  async connections(claims: AgentTokenClaims): Promise<Record<string, string>> {
    const conns = await this.deliver(claims, 'connections', (ids, grants) =>
      this.o.vault.resolveConnections(claims.tenant_id, ids, grants),
    );
    const out: Record<string, string> = {};
    for (const [id, conn] of conns) out[id] = formatConnectionUri(conn);
    return out;
  }

  private async deliver<T>(
    claims: AgentTokenClaims,
    kind: SecretKind,
    read: (names: readonly string[] | 'all', grants: GrantFilter) => Promise<Map<string, T>>,
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

      // An unreadable declaration is inconclusive, never a "not live": planScope decides.
      const declared = await this.declared(claims, kind);
      const plan = planScope(this.o.scoping, declared);

      let result: Map<string, T>;
      // Grants (issue 34): registration refused a DAG declaring an ungranted secret, and a grant
      // narrowed since is enforced here: values are decrypted only for what the DAG is granted.
      const grants: GrantFilter = { dagId: claims.dag_id, ungranted: [] };
      if (plan.read === 'unavailable') {
        throw new SecretUnavailable(
          `the ${kind} declaration of this task could not be read (secret_scoping=enforce); retry`,
        );
      } else if (plan.read === 'nothing') {
        result = new Map();
      } else if (plan.read === 'declared') {
        result = await read(plan.names, grants);
        this.refuseUngranted(claims, kind, grants.ungranted);
      } else {
        result = await read('all', grants);
        // The whole vault (migration modes) never carries what is not granted to this DAG; a
        // declared one that is not granted is refused as under enforce.
        const declaredNames = new Set(declared ?? []);
        this.refuseUngranted(
          claims,
          kind,
          grants.ungranted.filter((n) => declaredNames.has(n)),
        );
        if (
          plan.warnWhenNarrower &&
          declared !== undefined &&
          isNarrowerThanVault(declared, new Set(result.keys()))
        ) {
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
      await this.o.records?.delivered(claims, kind, [...result.keys()]);
      return result;
    } catch (err) {
      if (err instanceof SecretRefusal) await this.o.records?.refused(claims, kind, err.reason);
      else if (err instanceof SecretUnavailable)
        await this.o.records?.refused(claims, kind, 'declaration_unreadable');
      throw err;
    } finally {
      this.metrics.latency(kind, (performance.now() - started) / 1000);
    }
  }

  /** LF_SECRET_NOT_GRANTED for the declared names the grants do not give this DAG. */
  private refuseUngranted(claims: AgentTokenClaims, kind: SecretKind, names: string[]): void {
    if (names.length === 0) return;
    this.metrics.denied(kind, 'not_granted');
    throw new SecretRefusal(
      `${SECRET_NOT_GRANTED_CODE}: ${notGrantedMessage(claims.dag_id, kind, [...names].sort())}`,
      'not_granted',
      SECRET_NOT_GRANTED_CODE,
    );
  }

  /**
   * D5: the names the task reported reading through the SDK. Under permissive, each one its
   * DAG did not declare — and that this attempt was actually delivered (so a task cannot plant
   * arbitrary names in the audit log) — becomes one `secret.undeclared_use` audit event (the
   * name, never a value) and lands in the attempt record, once per attempt. Other modes: no-op
   * (enforce never delivers an undeclared name; off is silent by choice).
   */
  async recordReads(
    claims: AgentTokenClaims,
    reads: { variables: readonly string[]; connections: readonly string[] },
  ): Promise<void> {
    if (this.o.scoping !== 'permissive' || !this.o.records) return;
    if (reads.variables.length === 0 && reads.connections.length === 0) return;
    try {
      const rec = await this.o.store.getAttemptRecord(claims.task_instance_id, claims.try_number);
      if (!rec) return;
      const undeclared = { variables: [] as string[], connections: [] as string[] };
      for (const kind of ['variables', 'connections'] as const) {
        const delivered = new Set(
          (kind === 'variables' ? rec.variables_delivered : rec.connections_delivered) ?? [],
        );
        const names = [...new Set(reads[kind])].filter((n) => delivered.has(n));
        if (names.length === 0) continue;
        const declared = await this.declared(claims, kind);
        if (declared === undefined) continue;
        const d = new Set(declared);
        undeclared[kind] = names.filter((n) => !d.has(n)).sort();
      }
      if (undeclared.variables.length === 0 && undeclared.connections.length === 0) return;
      const now = this.o.clock.now();
      if (
        !(await this.o.store.noteUndeclaredReads(
          rec.task_instance_id,
          rec.try_number,
          undeclared,
          now,
        ))
      )
        return; // already recorded (a retried report)
      for (const kind of ['variables', 'connections'] as const) {
        for (const name of undeclared[kind]) {
          await this.audit(claims, 'secret.undeclared_use', { kind, name });
        }
      }
      this.o.logger.warn(
        {
          dag_id: claims.dag_id,
          task_id: claims.task_id,
          variables: undeclared.variables,
          connections: undeclared.connections,
        },
        'task read vault entries its DAG did not declare (secret_scoping=permissive); declare them before switching to enforce',
      );
    } catch (err) {
      this.o.logger.warn({ err }, 'undeclared-use record not written');
    }
  }

  /**
   * The attempt's declared names of one kind, or undefined when the run or its DAG version is
   * missing or cannot be read (a datastore-side problem; logged).
   */
  async declared(claims: AgentTokenClaims, kind: SecretKind): Promise<string[] | undefined> {
    try {
      const run = await this.o.store.getRunSpecRef(claims.dag_run_id);
      if (!run) {
        this.o.logger.warn({ kind }, 'run of a secret fetch not found; declaration unknown');
        return undefined;
      }
      const spec = await this.o.specs.get(run.tenant_id, run.dag_id, run.dag_version);
      return [...declaredSet(spec, claims.task_id, kind)];
    } catch (err) {
      this.o.logger.warn({ err, kind }, 'declaration could not be read');
      return undefined;
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
        claims.map_index,
      );
    } catch (err) {
      // Inconclusive: deliver. The short token lifetime bounds what a blip can leak.
      this.o.logger.warn(
        { err, kind },
        'liveness read failed; delivering (deny only on a positive not-live)',
      );
      liveness = undefined;
    }
    if (liveness && !liveness.live && !liveness.revoked && this.o.liveness === 'observe') {
      // Observe would deliver to this ended or superseded attempt: unless its credential was
      // revoked, which for a try the row no longer carries is on its record (issue 34). One
      // read, on this path only.
      try {
        if (await this.o.store.isAttemptRecordRevoked(claims.task_instance_id, claims.try_number))
          liveness = { live: false, revoked: true };
      } catch (err) {
        this.o.logger.warn({ err, kind }, 'revocation read failed; liveness decides');
      }
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
          ...(claims.map_index >= 0 ? { map_index: claims.map_index } : {}),
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
