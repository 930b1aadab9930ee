import type { SecretKind } from '@leoflow/core';
import type { ExchangeRefusal } from '../executor/kubernetes/exchange/token-exchange.js';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import { REGISTRATION_PATHS, type RegistrationPath } from '../attempts/attempt-registration.js';

/**
 * not_live / revoked: the liveness gate; expired / invalid: the token itself; insecure_channel:
 * secrets refused over a cleartext non-loopback agent channel; not_granted: a declared secret
 * whose grants no longer name the DAG.
 */
export type SecretDenyReason =
  'not_live' | 'revoked' | 'expired' | 'invalid' | 'insecure_channel' | 'not_granted';

export const SECRET_KINDS: readonly SecretKind[] = ['variables', 'connections'];
export const SECRET_DENY_REASONS: readonly SecretDenyReason[] = [
  'not_live',
  'revoked',
  'expired',
  'invalid',
  'insecure_channel',
  'not_granted',
];

/**
 * A secret RPC is a token check, a liveness read and one scoped query: sub-millisecond when
 * cached and local, tens of ms on a remote Postgres. Buckets resolve both ends and catch the
 * 100 ms+ tail.
 */
export const SECRET_RPC_BUCKETS_SECONDS = [
  0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
];

export interface CredentialMetricsOptions {
  /** process_* and nodejs_* metrics; default true. Off in tests that assert exact output. */
  defaultMetrics?: boolean;
}

/**
 * The credential plane's Prometheus metrics, on a registry of their own (never prom-client's
 * global one, so two control planes in one process — tests — do not collide). Counts only:
 * no label ever carries a tenant, DAG, task or secret name.
 */
export class CredentialMetrics {
  readonly registry: Registry;
  readonly deliveriesTotal: Counter<'kind'>;
  readonly deniedTotal: Counter<'kind' | 'reason'>;
  readonly wouldDenyTotal: Counter<'kind'>;
  readonly renewalsTotal: Counter;
  readonly ceilingStoppedTotal: Counter;
  readonly secretRpcSeconds: Histogram<'kind'>;
  /** one per TokenReview the exchange sends: the tests hold it equal to the pods exchanged */
  readonly tokenReviewsTotal: Counter;
  readonly tokenExchangesTotal: Counter<'outcome'>;
  /** attempts registered, by who registered them (the agent's Register, or its executor at hand-off) */
  readonly attemptRegistrationsTotal: Counter<'via' | 'outcome'>;

  constructor(opts: CredentialMetricsOptions = {}) {
    const registers = [(this.registry = new Registry())];
    this.deliveriesTotal = new Counter({
      name: 'leoflow_secret_deliveries_total',
      help: 'Secret fetches (GetVariables/GetConnections) answered with a delivery',
      labelNames: ['kind'],
      registers,
    });
    this.deniedTotal = new Counter({
      name: 'leoflow_secret_denied_total',
      help: 'Secret fetches refused, by reason',
      labelNames: ['kind', 'reason'],
      registers,
    });
    this.wouldDenyTotal = new Counter({
      name: 'leoflow_secret_would_deny_total',
      help: 'Secret fetches delivered in observe mode that enforce mode would have refused',
      labelNames: ['kind'],
      registers,
    });
    this.renewalsTotal = new Counter({
      name: 'leoflow_credential_renewals_total',
      help: 'Per-attempt tokens re-minted on a heartbeat',
      registers,
    });
    this.ceilingStoppedTotal = new Counter({
      name: 'leoflow_credential_ceiling_stopped_total',
      help: 'Heartbeat renewals withheld because the attempt credential reached its lifetime ceiling',
      registers,
    });
    this.secretRpcSeconds = new Histogram({
      name: 'leoflow_secret_rpc_seconds',
      help: 'Latency of GetVariables/GetConnections, including refusals',
      labelNames: ['kind'],
      buckets: SECRET_RPC_BUCKETS_SECONDS,
      registers,
    });
    this.tokenReviewsTotal = new Counter({
      name: 'leoflow_token_reviews_total',
      help: 'TokenReviews sent to the Kubernetes apiserver by the token exchange (one per pod)',
      registers,
    });
    this.tokenExchangesTotal = new Counter({
      name: 'leoflow_token_exchanges_total',
      help: 'Token exchanges, by outcome (attempt, worker, or the refusal class)',
      labelNames: ['outcome'],
      registers,
    });
    this.attemptRegistrationsTotal = new Counter({
      name: 'leoflow_attempt_registrations_total',
      help: 'Attempt registrations (the fenced queued -> running write), by who made them (rpc: the agent called Register; handoff: the subprocess executor registered a standby agent at hand-off) and outcome (registered, or terminate: the try had moved on)',
      labelNames: ['via', 'outcome'],
      registers,
    });
    for (const via of REGISTRATION_PATHS)
      for (const outcome of ['registered', 'terminate'] as const)
        this.attemptRegistrationsTotal.inc({ via, outcome }, 0);
    this.tokenReviewsTotal.inc(0);
    for (const outcome of ['attempt', 'worker']) this.tokenExchangesTotal.inc({ outcome }, 0);
    // Zeroed up front so every series exists from the first scrape: rate() over a series that
    // appears only on its first increment misses that increment.
    for (const kind of SECRET_KINDS) {
      this.deliveriesTotal.inc({ kind }, 0);
      this.wouldDenyTotal.inc({ kind }, 0);
      this.secretRpcSeconds.zero({ kind });
      for (const reason of SECRET_DENY_REASONS) this.deniedTotal.inc({ kind, reason }, 0);
    }
    this.renewalsTotal.inc(0);
    this.ceilingStoppedTotal.inc(0);
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  // The method names match the SecretMetrics / onRenewal hooks the RPC layer calls, so an
  // instance can be handed to it as is.

  delivered(kind: SecretKind): void {
    this.deliveriesTotal.inc({ kind });
  }

  denied(kind: SecretKind, reason: SecretDenyReason): void {
    this.deniedTotal.inc({ kind, reason });
  }

  wouldDeny(kind: SecretKind): void {
    this.wouldDenyTotal.inc({ kind });
  }

  latency(kind: SecretKind, seconds: number): void {
    this.secretRpcSeconds.observe({ kind }, seconds);
  }

  /** Starts timing one secret RPC; call the result exactly once when it answers (or throws). */
  timeSecretRpc(kind: SecretKind): () => void {
    const end = this.secretRpcSeconds.startTimer({ kind });
    return () => {
      end();
    };
  }

  renewed(): void {
    this.renewalsTotal.inc();
  }

  ceilingStopped(): void {
    this.ceilingStoppedTotal.inc();
  }

  /** ExchangeMetrics (executor/kubernetes/exchange/token-exchange.ts) */
  tokenReviewed(): void {
    this.tokenReviewsTotal.inc();
  }

  exchanged(outcome: 'attempt' | 'worker' | ExchangeRefusal): void {
    this.tokenExchangesTotal.inc({ outcome });
  }

  /** RegistrationMetrics (attempts/attempt-registration.ts) */
  registration(via: RegistrationPath, outcome: 'registered' | 'terminate'): void {
    this.attemptRegistrationsTotal.inc({ via, outcome });
  }

  /** For the heartbeat's onRenewal hook. */
  renewal(outcome: 'renewed' | 'ceiling_stopped'): void {
    if (outcome === 'renewed') this.renewed();
    else this.ceilingStopped();
  }
}
