import {
  displaySetting,
  formatDuration,
  SETTINGS,
  type ConfigSource,
  type SettingValue,
} from '@leoflow/core';
import type { ServerConfig } from '../config/server-config.js';
import { redactDatabaseUrl } from './redact.js';
import type { RedactedConfig, ReportedSetting } from './types.js';

/** Doctor section: the effective configuration, as the report's `config`. */

/** The effective configuration with nothing secret in it (an allow-list, not a copy). */
export function redactedConfig(cfg: ServerConfig): RedactedConfig {
  const c = cfg.credentials;
  const ms = (v: number) => formatDuration(v / 1000);
  return {
    data_dir: cfg.dataDir,
    tenant_id: cfg.tenantId,
    database:
      cfg.database.kind === 'sqlite'
        ? { kind: 'sqlite', file: cfg.database.file }
        : {
            kind: 'postgres',
            url: redactDatabaseUrl(cfg.database.url),
            ...(cfg.database.schema !== undefined ? { schema: cfg.database.schema } : {}),
          },
    http: { host: cfg.http.host, port: cfg.http.port },
    agent: {
      host: cfg.agent.host,
      port: cfg.agent.port,
      advertise_url: cfg.agent.advertiseUrls?.join(',') ?? null,
      tls: cfg.agent.tls
        ? {
            cert_file: cfg.agent.tls.certFile,
            key_file: cfg.agent.tls.keyFile,
            ca_file: cfg.agent.tls.caFile,
          }
        : null,
    },
    metrics: { host: cfg.metrics.host, port: cfg.metrics.port },
    dags_folder: cfg.dagsFolder,
    vault_seed_dir: cfg.vaultSeedDir,
    log_level: cfg.logLevel,
    credentials: {
      'auth.secret_scoping': c.secretScoping,
      'auth.secret_liveness_mode': c.secretLivenessMode,
      'auth.max_attempt_credential_lifetime': formatDuration(c.maxAttemptCredentialLifetimeSeconds),
      'auth.agent_token_transport': c.agentTokenTransport,
      'auth.exchange_bootstrap': c.exchangeBootstrap,
      'execution.warm_pools_enabled': c.warmPoolsEnabled,
    },
    execution: {
      heartbeat_interval: ms(cfg.execution.heartbeatIntervalMs),
      agent_lost_threshold: ms(cfg.execution.agentLostThresholdMs),
      dispatch_lost_threshold: ms(cfg.execution.dispatchLostThresholdMs),
      attempt_uid_range: cfg.subprocess.attemptUidRange,
      attempt_nproc_limit: cfg.subprocess.attemptNprocLimit,
      run_as_user: cfg.subprocess.runAsUser,
      standby_agents: cfg.subprocess.standbyAgents,
      work_dir: cfg.subprocess.workDir,
    },
  };
}

/** Every setting of core's table, in table order, with its source; secrets redacted, then scrubbed. */
export function reportedSettings(
  settings: { values: Record<string, SettingValue>; sources: Record<string, ConfigSource> },
  scrub: (s: string) => string,
): ReportedSetting[] {
  return SETTINGS.filter((spec) => !spec.reserved || settings.sources[spec.key] !== undefined).map(
    (spec) => ({
      key: spec.key,
      value: scrub(displaySetting(spec, settings.values[spec.key] ?? null)),
      source: settings.sources[spec.key] ?? 'default',
      section: spec.section,
    }),
  );
}
