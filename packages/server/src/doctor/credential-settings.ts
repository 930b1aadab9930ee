import { agentTokenTtlSeconds, formatDuration } from '@leoflow/core';
import type { ServerConfig } from '../config/server-config.js';
import { EXECUTOR_KINDS } from '../executor/catalog.js';
import { envvarTransport } from '../executor/kubernetes/token-transport.js';
import type { SectionContext } from './findings.js';
import type { Posture } from './types.js';

/** What the posture says of an executor kind this build does not have. */
export const NOT_IN_THIS_BUILD = 'not available in this build';

/** How the named executor hands an attempt its credential, as that executor reports it. */
export function tokenTransportOf(name: string, cfg: ServerConfig): string {
  return EXECUTOR_KINDS.get(name)?.posture(cfg).tokenTransport ?? NOT_IN_THIS_BUILD;
}

export type CredentialPosture = Pick<
  Posture,
  | 'secret_scoping'
  | 'secret_liveness_mode'
  | 'attempt_token_ttl'
  | 'max_attempt_credential_lifetime'
  | 'token_transport'
>;

/**
 * Doctor section: the credential settings — secret scoping, the liveness mode, the attempt
 * token's TTL and renewal ceiling, how tokens reach agents — and the exposures each setting
 * leaves open.
 */
export function credentialSettings(ctx: SectionContext): CredentialPosture {
  const { cfg, expose } = ctx;
  const cred = cfg.credentials;
  const ttl = formatDuration(agentTokenTtlSeconds(cfg.execution.heartbeatIntervalMs / 1000));
  // The defaults are enforce / enforce (issue 34): each other mode is a rollout or migration
  // device and doctor names it, so an installation left in one does not look finished.
  if (cred.secretScoping === 'permissive') {
    expose(
      'secret_scoping.permissive',
      'Secret scoping is permissive, a migration mode: every task receives the whole tenant vault, including Variables and Connections it did not declare, with only a count-only secret.scope_warning in the audit log.',
      'Declare what each DAG needs (connections: / variables:; secret.undeclared_use lists what tasks read) and run with --secret-scoping enforce, the default.',
    );
  } else if (cred.secretScoping === 'off') {
    expose(
      'secret_scoping.off',
      'Secret scoping is off, a migration mode: every task receives the whole tenant vault and nothing records that it received more than it declared.',
      'Declare what each DAG needs and run with --secret-scoping enforce, the default (or permissive to see the gaps first).',
    );
  }
  if (cred.secretLivenessMode === 'observe') {
    expose(
      'secret_liveness.observe',
      `Liveness is observe, a rollout mode: an attempt that is no longer live (finished, failed, reaped or cleared) can still fetch secrets with its token until that token expires (up to ${ttl} after its last renewal), recorded only as secret.liveness_would_deny.`,
      'Once secret.liveness_would_deny shows no live task would be refused, run with --secret-liveness-mode enforce, the default.',
    );
  }
  if (cred.maxAttemptCredentialLifetimeSeconds <= 0) {
    expose(
      'credential_lifetime.unbounded',
      "The credential renewal ceiling is disabled: a live attempt's token keeps being renewed for as long as the attempt heartbeats.",
      'Set --max-attempt-credential-lifetime (default 24h) to bound it.',
    );
  }
  if (cfg.kubernetes && cred.agentTokenTransport === 'envvar' && envvarTransport.exposure) {
    // The Kubernetes executor puts each attempt token on its Pod (exchange puts none there).
    expose('token_transport.envvar', envvarTransport.exposure.what, envvarTransport.exposure.fix);
  }
  return {
    secret_scoping: cred.secretScoping,
    secret_liveness_mode: cred.secretLivenessMode,
    attempt_token_ttl: ttl,
    max_attempt_credential_lifetime:
      cred.maxAttemptCredentialLifetimeSeconds > 0
        ? formatDuration(cred.maxAttemptCredentialLifetimeSeconds)
        : 'disabled',
    token_transport: {
      subprocess: tokenTransportOf('subprocess', cfg),
      kubernetes: tokenTransportOf('kubernetes', cfg),
      configured: cred.agentTokenTransport,
      exchange_bootstrap: cred.exchangeBootstrap,
      warm_pools: warmPoolsPosture(cred.warmPoolsEnabled, cfg.kubernetes?.warmPools?.length ?? 0),
    },
  };
}

/**
 * The server side of warm pools is built; the agent's worker loop is not, so no shipped image
 * serves a pool yet (docs/kubernetes.md, "Warm pools"): doctor says so rather than "enabled".
 */
function warmPoolsPosture(enabled: boolean, pools: number): string {
  if (!enabled) return 'disabled';
  if (pools === 0) return 'enabled in config; no executor.kubernetes.warm_pools configured';
  return `enabled: ${pools} pool(s)`;
}
