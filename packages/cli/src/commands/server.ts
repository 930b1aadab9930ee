import type { Command } from 'commander';
import type { ServerConfig } from '@leoflow/server';
import { addSettingOptions } from '../settings.js';
import { commandConfig, type StandaloneFlags } from './standalone.js';

/** standalone's settings plus Pro's own (role, keys dir, the scheduler lease, drain). */
export async function serverConfig(
  flags: StandaloneFlags,
  env: Record<string, string | undefined> = process.env,
): Promise<ServerConfig> {
  return (await commandConfig('server', flags, env)).cfg;
}

/**
 * `leoflow server`. `planeOptions` reach startControlPlane as they are: the CLI passes none; a
 * test's replica entry passes its own clock (test/e2e/pro-faults/clock-replica.mjs).
 */
export function registerServer(
  program: Command,
  planeOptions: { clock?: { now(): number; monotonicNow?(): number } } = {},
): void {
  addSettingOptions(program.command('server'), 'server')
    .description(
      'run a Leoflow Pro replica on PostgreSQL: REST API, agent RPC and/or the elected scheduler (see --role)',
    )
    .action(async (flags: StandaloneFlags) => {
      const cfg = await serverConfig(flags);
      const { startControlPlane } = await import('@leoflow/server');
      const cp = await startControlPlane(cfg, planeOptions);
      const pro = cfg.pro!;
      process.stdout.write(
        [
          `Leoflow Pro replica (role ${pro.role}) is running.`,
          pro.role === 'scheduler'
            ? `  probes       ${cp.httpUrl}/healthz, ${cp.httpUrl}/readyz (no REST API on this role)`
            : `  REST API     ${cp.httpUrl}/api/v1 (probes: /healthz, /readyz)`,
          ...(pro.role === 'scheduler'
            ? []
            : [
                cp.ui
                  ? `  web app      ${cp.ui.url}`
                  : '  web app      (not built: run `npm run build` to build packages/ui)',
                ...(cp.ui?.signInUrl
                  ? [
                      `  sign in      ${cp.ui.signInUrl}`,
                      '               (one use, valid 10 minutes, on this replica: signs this browser in as the admin token)',
                    ]
                  : []),
              ]),
          `  agent RPC    listens on ${cfg.agent.host}:${cp.agentPort} (gRPC over HTTP/2${cfg.agent.tls ? ', TLS' : ', cleartext on loopback'})`,
          `  agents dial  ${cp.agentUrl.split(',').join(', ')}${cfg.agent.advertiseUrls ? '' : " (this replica only: give every replica --agent-advertise-url with every replica's agent URL)"}`,
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
