import { resolve } from 'node:path';
import type { Command } from 'commander';
import { CliError } from '../client.js';

interface DoorFlags {
  dataDir?: string;
  host?: string;
  port?: string;
  databaseUrl?: string;
  directorySchema?: string;
  directoryFile?: string;
  bundle?: string;
  logLevel?: string;
}

export function registerDoor(program: Command): void {
  program
    .command('door')
    .description(
      'run the runner door as its own process: the one public URL inbound runners reach their cell through (docs/runners.md)',
    )
    .option('--data-dir <dir>', "the door's own keys (default .leoflow-door)")
    .option('--host <host>', 'listen address (default 127.0.0.1)')
    .option('--port <port>', 'listen port (default 8443; 0 picks a free one)')
    .option('--database-url <url>', 'PostgreSQL holding the directory (Pro)')
    .option('--directory-schema <schema>', 'its schema (default leoflow_directory)')
    .option('--directory-file <file>', "or a Lite installation's SQLite file")
    .option('--bundle <file>', 'the runner bundle the bundle path serves')
    .option('--log-level <level>', 'debug, info, warn, error (default info)')
    .action(async (flags: DoorFlags) => {
      const env = process.env;
      const url = flags.databaseUrl ?? env.LEOFLOW_DATABASE_URL;
      const file = flags.directoryFile ?? env.LEOFLOW_DIRECTORY_FILE;
      if ((url === undefined) === (file === undefined)) {
        throw new CliError(
          'give the directory: --database-url (Pro) or --directory-file (a Lite SQLite file), one of them',
          2,
          'LF_USAGE',
        );
      }
      const portText = flags.port ?? env.LEOFLOW_DOOR_PORT ?? '8443';
      const port = Number(portText);
      if (!Number.isInteger(port) || port < 0 || port > 65535) {
        throw new CliError(`--port must be 0-65535 (got "${portText}")`, 2, 'LF_CONFIG_INVALID');
      }
      const { startDoorProcess, createLogger, systemClock } = await import('@leoflow/server');
      const dataDir = resolve(flags.dataDir ?? env.LEOFLOW_DOOR_DATA_DIR ?? '.leoflow-door');
      const door = await startDoorProcess({
        dataDir,
        directory:
          url !== undefined
            ? {
                kind: 'postgres',
                url,
                schema:
                  flags.directorySchema ?? env.LEOFLOW_DIRECTORY_SCHEMA ?? 'leoflow_directory',
              }
            : { kind: 'sqlite', file: resolve(file ?? '') },
        host: flags.host ?? env.LEOFLOW_DOOR_HOST ?? '127.0.0.1',
        port,
        bundleFile: flags.bundle ? resolve(flags.bundle) : null,
        clock: systemClock,
        logger: createLogger(flags.logLevel ?? 'info'),
      });
      process.stdout.write(
        [
          'Leoflow door is running.',
          `  runners      ${door.url}/runners/<token>/{login,session,bundle}`,
          `  public keys  ${door.publicKeysFile} (give it to each cell: --door-keys-file)`,
          '',
        ].join('\n'),
      );
      let closing = false;
      const shutdown = () => {
        if (closing) process.exit(130);
        closing = true;
        void door.close().then(() => process.exit(0));
      };
      process.on('SIGINT', shutdown);
      process.on('SIGTERM', shutdown);
    });
}
