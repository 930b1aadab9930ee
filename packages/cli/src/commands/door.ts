import type { Command } from 'commander';
import { CliError } from '../client.js';
import { addSettingOptions, commandSettings } from '../settings.js';

export function registerDoor(program: Command): void {
  addSettingOptions(
    program
      .command('door')
      .description(
        'run the runner door as its own process: the one public URL inbound runners reach their cell through (docs/runners.md)',
      ),
    'door',
  ).action(async (flags: Record<string, unknown>) => {
    const { settings } = await commandSettings('door', flags);
    if (
      (settings.values['database.url'] === null) ===
      (settings.values['directory.file'] === null)
    ) {
      throw new CliError(
        'give the directory: --database-url (Pro) or --directory-file (a Lite SQLite file), one of them',
        2,
        'LF_USAGE',
      );
    }
    const { startDoorProcess, createLogger, systemClock } = await import('@leoflow/server');
    const { doorConfigFromSettings } = await import('@leoflow/server');
    const door = doorConfigFromSettings(settings);
    const running = await startDoorProcess({
      dataDir: door.dataDir,
      directory: door.directory,
      host: door.host,
      port: door.port,
      bundleFile: door.bundleFile,
      clock: systemClock,
      logger: createLogger(door.logLevel),
    });
    process.stdout.write(
      [
        'Leoflow door is running.',
        `  runners      ${running.url}/runners/<token>/{login,session,bundle}`,
        `  public keys  ${running.publicKeysFile} (give it to each cell: --door-keys-file)`,
        '',
      ].join('\n'),
    );
    let closing = false;
    const shutdown = () => {
      if (closing) process.exit(130);
      closing = true;
      void running.close().then(() => process.exit(0));
    };
    process.on('SIGINT', shutdown);
    process.on('SIGTERM', shutdown);
  });
}
