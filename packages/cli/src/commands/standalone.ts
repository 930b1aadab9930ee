import type { Command } from 'commander';
import { isLeoflowError, type ResolvedSettings } from '@leoflow/core';
import type { ServerConfig } from '@leoflow/server';
import { CliError } from '../client.js';
import { addSettingOptions, commandSettings } from '../settings.js';

/** The flags `leoflow standalone` and `leoflow doctor` share: one property per setting. */
export type StandaloneFlags = Record<string, unknown>;

/**
 * The configuration `leoflow standalone` runs with: core's settings table resolved (defaults <
 * config file < env < flags) and mapped onto the control plane's configuration in one place.
 */
export async function standaloneConfig(
  flags: StandaloneFlags,
  env: Record<string, string | undefined> = process.env,
): Promise<ServerConfig> {
  return (await commandConfig('standalone', flags, env)).cfg;
}

/** standalone's or server's configuration, with where each setting came from (for doctor). */
export async function commandConfig(
  command: 'standalone' | 'server',
  flags: StandaloneFlags,
  env: Record<string, string | undefined> = process.env,
): Promise<{ cfg: ServerConfig; settings: ResolvedSettings }> {
  const { settings, file } = await commandSettings(command, flags, env);
  // Loaded on demand: client commands should not pay for the whole control plane at start-up.
  const { parseExecutorSection, serverConfigFromSettings } = await import('@leoflow/server');
  const configFile = settings.values['config_file'];
  let executors;
  try {
    executors = parseExecutorSection(
      (file as { executor?: unknown } | undefined)?.executor,
      typeof configFile === 'string' ? configFile : null,
    );
  } catch (err) {
    if (isLeoflowError(err)) throw new CliError(err.message, 2, err.code);
    throw err;
  }
  return {
    cfg: serverConfigFromSettings(settings, { role: command, executors }),
    settings,
  };
}

/**
 * Declares every flag standaloneConfig reads, so each command that builds a Lite configuration
 * (`standalone` runs it, `doctor` inspects it) accepts exactly the same flags.
 */
export function addStandaloneOptions(cmd: Command): Command {
  return addSettingOptions(cmd, 'standalone');
}

export function registerStandalone(program: Command): void {
  addStandaloneOptions(program.command('standalone'))
    .description('run Leoflow Lite: API, scheduler, agent RPC and executor in one process (SQLite)')
    .action(async (flags: StandaloneFlags) => {
      const cfg = await standaloneConfig(flags);
      const { startControlPlane } = await import('@leoflow/server');
      const cp = await startControlPlane(cfg);
      const lines = [
        'Leoflow Lite is running.',
        `  REST API     ${cp.httpUrl}/api/v1`,
        cp.ui
          ? `  web app      ${cp.ui.url}`
          : '  web app      (not built: run `npm run build` to build packages/ui)',
        ...(cp.ui?.signInUrl
          ? [
              `  sign in      ${cp.ui.signInUrl}`,
              '               (one use, valid 10 minutes: signs this browser in as the admin token)',
            ]
          : []),
        `  API docs     ${cp.httpUrl}/api/v1/docs (OpenAPI 3.1: /api/v1/openapi.json)`,
        ...(cp.doorUrl !== null ? [`  runner door  ${cp.doorUrl}/runners/<token>/`] : []),
        `  agent RPC    ${cp.agentUrl} (gRPC over HTTP/2${cfg.agent.tls ? ', TLS' : ', cleartext on loopback'})`,
        `  metrics      ${cp.metricsUrl ?? '(off)'}`,
        `  data dir     ${cfg.dataDir}`,
        `  admin token  ${cp.adminTokenFile} (mode 0600; the CLI reads it from ./.leoflow, or set LEOFLOW_TOKEN)`,
        `  log in       leoflow login --url ${cp.httpUrl} --token-file ${cp.adminTokenFile}`,
        '               (saves a profile, mode 0600: the CLI then works from any folder)',
        `  DAGs folder  ${cfg.dagsFolder ? `${cfg.dagsFolder} (watched; what does not load: leoflow dags errors)` : '(none; push DAGs with `leoflow dags push <dir>`)'}`,
        `  new DAGs     ${cfg.dagsPausedAtCreation ? 'start paused (leoflow dags unpause <dag_id>; --dags-paused-at-creation false to change)' : 'start unpaused (--dags-paused-at-creation true pauses them, as Airflow does)'}`,
        cp.isolation.mode === 'per-attempt'
          ? `  tasks run as a uid of their own each, from ${cp.isolation.range.first}-${cp.isolation.range.last}`
          : cp.isolation.mode === 'shared'
            ? `  tasks run as ${cp.isolation.runAs.user} (uid ${cp.isolation.runAs.uid}), all attempts under that one uid`
            : '  tasks run as this user: task code can read the data directory (run as root to give every attempt its own uid)',
        `  work root    ${cp.workRoot}`,
        cp.sandbox.mode === 'namespaces'
          ? `  sandbox      namespaces (mount, IPC, PID, UTS${cp.sandbox.network === 'none' ? ', network' : ''}), private ${cp.sandbox.worldWritable.join(', ')}, read-only elsewhere, no_new_privs${cp.sandbox.landlock ? ', Landlock scoping' : ''}`
          : cp.sandbox.mode === 'uid'
            ? `  sandbox      PER-UID FALLBACK, no namespaces: ${cp.sandbox.why ?? ''}`
            : '  sandbox      NONE: not root, so no per-attempt uids and no namespaces (run as root to sandbox every attempt)',
        ...cp.sandbox.exposures.map((e) => `               exposure: ${e}`),
        '',
        `Try: leoflow runs trigger hello --wait   (the CLI from outside the clone: README, "Install the CLI")`,
        '',
      ];
      process.stdout.write(lines.join('\n'));
      let closing = false;
      const shutdown = (signal: string) => {
        if (closing) process.exit(130);
        closing = true;
        process.stdout.write(
          `\n${signal}: stopping (running attempts are stopped; press again to force)\n`,
        );
        void cp.close().then(() => process.exit(0));
      };
      process.on('SIGINT', () => shutdown('SIGINT'));
      process.on('SIGTERM', () => shutdown('SIGTERM'));
    });
}
