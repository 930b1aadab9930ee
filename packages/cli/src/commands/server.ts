import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { ServerConfig, ServerRole } from '@leoflow/server';
import { CliError } from '../client.js';
import { parseDurationMs } from '../duration.js';
import { addStandaloneOptions, standaloneConfig, type StandaloneFlags } from './standalone.js';

export interface ServerFlags extends StandaloneFlags {
  role?: string;
  keysDir?: string;
  agentHost?: string;
  agentAdvertiseUrl?: string;
  leaseTtl?: string;
  leaseRenewInterval?: string;
  leaseSafetyMargin?: string;
  drainGrace?: string;
}

/** standalone's settings plus Pro's own; defaults < env (LEOFLOW_…) < flags. */
export async function serverConfig(flags: ServerFlags, env = process.env): Promise<ServerConfig> {
  const cfg = await standaloneConfig(flags, env);
  const { DEFAULT_LEASE_TIMINGS, DEFAULT_DRAIN_GRACE_MS, SERVER_ROLES } =
    await import('@leoflow/server');
  const pick = (flag: string | undefined, envName: string) => flag ?? env[envName];
  const role = pick(flags.role, 'LEOFLOW_SERVER_ROLE') ?? 'all';
  if (!(SERVER_ROLES as readonly string[]).includes(role)) {
    throw new CliError(
      `--role must be one of ${SERVER_ROLES.join(', ')} (got "${role}")`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  const dur = (v: string | undefined, setting: string, fallback: number) =>
    v === undefined ? fallback : parseDurationMs(v, setting);
  const lease = {
    ttlMs: dur(
      pick(flags.leaseTtl, 'LEOFLOW_SCHEDULER_LEASE_TTL'),
      'scheduler.lease_ttl',
      DEFAULT_LEASE_TIMINGS.ttlMs,
    ),
    renewIntervalMs: dur(
      pick(flags.leaseRenewInterval, 'LEOFLOW_SCHEDULER_LEASE_RENEW_INTERVAL'),
      'scheduler.lease_renew_interval',
      DEFAULT_LEASE_TIMINGS.renewIntervalMs,
    ),
    safetyMarginMs: dur(
      pick(flags.leaseSafetyMargin, 'LEOFLOW_SCHEDULER_LEASE_SAFETY_MARGIN'),
      'scheduler.lease_safety_margin',
      DEFAULT_LEASE_TIMINGS.safetyMarginMs,
    ),
  };
  if (lease.renewIntervalMs + lease.safetyMarginMs >= lease.ttlMs) {
    throw new CliError(
      `scheduler.lease_renew_interval (${lease.renewIntervalMs} ms) + scheduler.lease_safety_margin (${lease.safetyMarginMs} ms) must be below scheduler.lease_ttl (${lease.ttlMs} ms): the leader renews at least once before its deadline`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  const keysDir = pick(flags.keysDir, 'LEOFLOW_KEYS_DIR');
  const agentHost = pick(flags.agentHost, 'LEOFLOW_AGENT_HOST');
  if (agentHost) cfg.agent.host = agentHost;
  const advertise = pick(flags.agentAdvertiseUrl, 'LEOFLOW_AGENT_ADVERTISE_URL');
  if (advertise) {
    if (!/^https?:\/\/[^/]+/.test(advertise)) {
      throw new CliError(
        `--agent-advertise-url must be an http(s):// URL agents can dial (got "${advertise}")`,
        2,
        'LF_CONFIG_INVALID',
      );
    }
    cfg.agent.advertiseUrl = advertise;
  }
  cfg.pro = {
    role: role as ServerRole,
    lease,
    drainGraceMs: dur(
      pick(flags.drainGrace, 'LEOFLOW_SERVER_DRAIN_GRACE'),
      'server.drain_grace',
      DEFAULT_DRAIN_GRACE_MS,
    ),
    keysDir: keysDir ? resolve(keysDir) : cfg.dataDir,
  };
  return cfg;
}

export function registerServer(program: Command): void {
  addStandaloneOptions(program.command('server'))
    .description(
      'run a Leoflow Pro replica on PostgreSQL: REST API, agent RPC and/or the elected scheduler (see --role)',
    )
    .option(
      '--role <role>',
      'all (default): API and scheduler; api: API and agent RPC, never schedules; scheduler: contends for the scheduler lease, no REST API',
    )
    .option(
      '--keys-dir <dir>',
      'signing keyrings and the first admin token, shared by every replica (default: the data dir)',
    )
    .option('--agent-host <host>', 'agent RPC listen address (default 127.0.0.1)')
    .option(
      '--agent-advertise-url <url>',
      'the URL agents dial: one address that reaches every replica (a Service), so an agent outlives the replica that started it',
    )
    .option('--lease-ttl <duration>', 'scheduler lease lifetime in the database (default 15s)')
    .option('--lease-renew-interval <duration>', 'how often the leader renews (default 5s)')
    .option(
      '--lease-safety-margin <duration>',
      'the leader stops this much before its grant expires (default 3s)',
    )
    .option('--drain-grace <duration>', 'SIGTERM: time to drain before exiting (default 25s)')
    .action(async (flags: ServerFlags) => {
      const cfg = await serverConfig(flags);
      const { startControlPlane } = await import('@leoflow/server');
      const cp = await startControlPlane(cfg);
      const pro = cfg.pro!;
      process.stdout.write(
        [
          `Leoflow Pro replica (role ${pro.role}) is running.`,
          pro.role === 'scheduler'
            ? `  probes       ${cp.httpUrl}/healthz, ${cp.httpUrl}/readyz (no REST API on this role)`
            : `  REST API     ${cp.httpUrl}/api/v1 (probes: /healthz, /readyz)`,
          `  agent RPC    ${cp.agentUrl} (gRPC over HTTP/2${cfg.agent.tls ? ', TLS' : ', cleartext on loopback'})`,
          `  scheduler    ${pro.role === 'api' ? 'never on this role' : `contends for the lease (ttl ${pro.lease.ttlMs} ms, renew ${pro.lease.renewIntervalMs} ms)`}`,
          `  keys dir     ${pro.keysDir}`,
          `  admin token  ${cp.adminTokenFile} (mode 0600)`,
          '',
        ].join('\n'),
      );
      let draining = false;
      const shutdown = (signal: string) => {
        if (draining) process.exit(130);
        draining = true;
        process.stdout.write(
          `${signal}: draining (no new work; running attempts go on under the other replicas; again to force)\n`,
        );
        void cp.drain(pro.drainGraceMs).then((finished) => {
          if (!finished) {
            process.stderr.write(
              `drain did not finish within ${pro.drainGraceMs} ms (--drain-grace); exiting anyway\n`,
            );
          }
          process.exit(finished ? 0 : 1);
        });
      };
      process.on('SIGINT', () => shutdown('SIGINT'));
      process.on('SIGTERM', () => shutdown('SIGTERM'));
    });
}
