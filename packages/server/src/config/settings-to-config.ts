import { resolve } from 'node:path';
import {
  parseIsolationMode,
  parseNetworkMode,
  parseWritablePaths,
  type ResolvedSettings,
  type SettingValue,
} from '@leoflow/core';
import type { ExecutorSection } from './executor-config.js';
import type { ServerRole } from './pro-config.js';
import { defaultServerConfig, type ServerConfig } from './server-config.js';

/**
 * The one mapping from resolved settings (core's key table, packages/core/src/config/settings.ts)
 * onto a control plane's configuration. `leoflow standalone`, `server` and `doctor` all call it;
 * nothing else turns a setting into a ServerConfig field.
 */
export function serverConfigFromSettings(
  settings: Pick<ResolvedSettings, 'values' | 'sources' | 'credentials'>,
  opts: { role: 'standalone' | 'server'; executors: ExecutorSection },
): ServerConfig {
  const v = settings.values;
  const text = (key: string) => nullable(v[key], (x) => String(x));
  const num = (key: string) => nullable(v[key], Number);
  const ms = (key: string) => Math.round(Number(v[key]) * 1000);
  const path = (key: string) => nullable(v[key], (x) => resolve(String(x)));

  const cfg = defaultServerConfig(String(v['data_dir']));
  cfg.http = { host: String(v['http.host']), port: Number(v['http.port']) };
  cfg.agent.host = String(v['agent.host']);
  cfg.agent.port = Number(v['agent.port']);
  const advertised = v['agent.advertise_url'];
  cfg.agent.advertiseUrls = Array.isArray(advertised) ? advertised.map(String) : null;
  const cert = path('agent.tls.cert');
  const key = path('agent.tls.key');
  cfg.agent.tls =
    cert !== null && key !== null
      ? { certFile: cert, keyFile: key, caFile: path('agent.tls.ca') }
      : null;
  const db = text('database.url');
  if (db !== null) {
    const schema = text('database.schema');
    cfg.database = { kind: 'postgres', url: db, ...(schema !== null ? { schema } : {}) };
  }
  cfg.directory.schema = String(v['directory.schema']);
  cfg.dagsFolder = path('dags.folder');
  cfg.dagsPausedAtCreation = v['dags.paused_at_creation'] === true;
  cfg.vaultSeedDir = path('vault.seed');
  cfg.logLevel = String(v['log.level']);
  cfg.metrics.port = num('metrics.port');
  // A second Lite on the host finds the default taken: it takes a free one, unless the operator
  // chose this port (then the port is theirs, and a clash is an error naming it). Replicas are
  // placed by an operator: none of their ports is replaced.
  cfg.metrics.freePortIfDefaultTaken =
    opts.role === 'standalone' && settings.sources['metrics.port'] === 'default';

  cfg.credentials = settings.credentials;
  cfg.execution.heartbeatIntervalMs = Math.round(
    settings.credentials.heartbeatIntervalSeconds * 1000,
  );
  cfg.execution.agentLostThresholdMs = Math.round(
    settings.credentials.agentLostThresholdSeconds * 1000,
  );
  cfg.execution.dispatchLostThresholdMs = ms('execution.dispatch_lost_threshold');
  const sub = cfg.subprocess;
  sub.attemptUidRange = text('execution.attempt_uid_range');
  sub.attemptNprocLimit = Number(v['execution.attempt_nproc_limit']);
  sub.runAsUser = text('execution.run_as_user');
  sub.standbyAgents = Number(v['execution.standby_agents']);
  sub.hostAgent = v['execution.host_agent'] === 'on';
  // the attempt sandbox (validated by core's settingsProblems)
  sub.isolation = parseIsolationMode(String(v['execution.isolation']));
  sub.network = parseNetworkMode(String(v['execution.network']));
  const writable = v['execution.writable_paths'];
  sub.writablePaths = Array.isArray(writable) ? parseWritablePaths(writable as string[]) : [];
  sub.tmpfsSizeBytes = Number(v['execution.tmpfs_size']);

  cfg.logs = {
    maxLineBytes: Number(v['logs.max_line_bytes']),
    maxBytesPerAttempt: Number(v['logs.max_bytes_per_attempt']),
    writeGraceMs: ms('logs.write_grace'),
  };

  cfg.door.port = num('door.port');
  cfg.door.host = String(v['door.host']);
  cfg.door.publicUrl = nullable(v['door.url'], (x) => String(x).replace(/\/$/, ''));
  cfg.door.cellPort = num('cell.port');
  cfg.door.cellName = text('cell.name');
  cfg.door.trustedKeysFile = path('door.keys_file');

  cfg.settings = { values: settings.values, sources: settings.sources };
  cfg.kubernetes = opts.executors.kubernetes;
  if (opts.executors.defaultExecutor) cfg.defaultExecutor = opts.executors.defaultExecutor;

  if (opts.role === 'server') {
    cfg.pro = {
      role: String(v['server.role']) as ServerRole,
      lease: {
        ttlMs: ms('scheduler.lease_ttl'),
        renewIntervalMs: ms('scheduler.lease_renew_interval'),
        safetyMarginMs: ms('scheduler.lease_safety_margin'),
      },
      drainGraceMs: ms('server.drain_grace'),
      keysDir: path('keys_dir') ?? cfg.dataDir,
    };
  }
  return cfg;
}

/** The door process's settings (`leoflow door`), from the same table. */
export function doorConfigFromSettings(settings: Pick<ResolvedSettings, 'values'>): {
  dataDir: string;
  directory: { kind: 'postgres'; url: string; schema: string } | { kind: 'sqlite'; file: string };
  host: string;
  port: number;
  bundleFile: string | null;
  logLevel: string;
} {
  const v = settings.values;
  const url = v['database.url'];
  const file = v['directory.file'];
  return {
    dataDir: resolve(String(v['door.data_dir'])),
    directory:
      url !== null
        ? { kind: 'postgres', url: String(url), schema: String(v['directory.schema']) }
        : { kind: 'sqlite', file: resolve(String(file)) },
    host: String(v['door.host']),
    // the door process listens on 8443 unless told otherwise; in a cell the door is off by default
    port: v['door.port'] === null ? 8443 : Number(v['door.port']),
    bundleFile: nullable(v['door.bundle'], (x) => resolve(String(x))),
    logLevel: String(v['log.level']),
  };
}

function nullable<T>(value: SettingValue | undefined, map: (v: SettingValue) => T): T | null {
  return value === null || value === undefined ? null : map(value);
}
