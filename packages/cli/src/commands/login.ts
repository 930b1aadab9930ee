import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import {
  checkProfileName,
  cliConfigPath,
  loadCliConfig,
  normaliseUrl,
  saveCliConfig,
} from '../cli-config.js';
import { ApiClient, CliError, DEFAULT_URL, isLoopback } from '../client.js';
import { parseOutput, print } from '../output.js';
import { readTokenFile } from './config.js';

interface LoginFlags {
  tokenFile?: string;
  name?: string;
  use: boolean;
}

/** A profile name for a URL: `local` for this machine, else its host name. */
export function defaultProfileName(url: string): string {
  if (isLoopback(url)) return 'local';
  const host = new URL(url).hostname.replace(/[^A-Za-z0-9_.-]/g, '-').replace(/^[^A-Za-z0-9]+/, '');
  return host.slice(0, 63) || 'default';
}

export function registerLogin(program: Command): void {
  program
    .command('login')
    .description(
      'check a token against a control plane and save both as a profile (the CLI config file, mode 0600), selected from now on',
    )
    .option(
      '--token-file <file>',
      'read the token from this file ("-" for standard input); for a local standalone, its admin.token',
    )
    .option(
      '--name <profile>',
      'the profile to write (default: local for this machine, else the host)',
    )
    .option('--no-use', 'save the profile without making it the current one')
    .addHelpText(
      'after',
      '\nThe URL comes from --url or LEOFLOW_URL (default http://127.0.0.1:8080). Without\n' +
        '--token-file, --token or LEOFLOW_TOKEN, a loopback URL uses the local standalone admin\n' +
        'token (./.leoflow/admin.token or $LEOFLOW_DATA_DIR/admin.token). Nothing is written unless\n' +
        'the server accepts the token. Standalone prints the exact line at start.',
    )
    .action(async (flags: LoginFlags, cmd: Command) => {
      const raw = cmd.optsWithGlobals<{ url?: string; token?: string; output?: string }>();
      const format = parseOutput(
        cmd.getOptionValueSourceWithGlobals('output') === 'cli' ? raw.output : undefined,
      );
      const url = normaliseUrl(raw.url ?? (process.env.LEOFLOW_URL || DEFAULT_URL), '--url');
      if (flags.tokenFile !== undefined && raw.token !== undefined) {
        throw new CliError('give --token-file or --token, not both', 2, 'LF_USAGE');
      }
      let token: string | undefined;
      let from: string;
      if (flags.tokenFile !== undefined) {
        token = readTokenFile(flags.tokenFile);
        from = flags.tokenFile === '-' ? 'standard input' : resolve(flags.tokenFile);
      } else if (raw.token !== undefined) {
        token = raw.token;
        from = '--token';
        process.stderr.write(
          'warning: --token stays in shell history and shows in `ps`; prefer --token-file <file>\n',
        );
      } else if (process.env.LEOFLOW_TOKEN) {
        token = process.env.LEOFLOW_TOKEN;
        from = 'LEOFLOW_TOKEN';
      } else {
        const file = join(resolve(process.env.LEOFLOW_DATA_DIR ?? '.leoflow'), 'admin.token');
        if (!isLoopback(url) || !existsSync(file)) {
          throw new CliError(
            `no token to log in to ${url} with: pass --token-file <file> (or --token-file - with the token on standard input)` +
              (isLoopback(url)
                ? `; a local standalone's admin token is <its data dir>/admin.token (${file} does not exist)`
                : ''),
            2,
            'LF_LOGIN_NO_TOKEN',
          );
        }
        token = readTokenFile(file);
        from = file;
      }
      const name = flags.name ?? defaultProfileName(url);
      checkProfileName(name);
      // Nothing is written unless the server takes the token.
      const me = await new ApiClient({
        url,
        token,
        urlSource: 'flag',
        tokenSource: 'flag',
      }).request<{
        subject: string;
        tenant_id: string;
        role: string;
      }>('GET', '/api/v1/whoami');
      const file = cliConfigPath();
      const config = loadCliConfig(file);
      const before = config.profiles[name];
      config.profiles[name] = { ...(before?.output ? { output: before.output } : {}), url, token };
      if (flags.use) config.current_profile = name;
      saveCliConfig(config, file);
      const out = {
        profile: name,
        url,
        tenant_id: me.tenant_id,
        role: me.role,
        subject: me.subject,
        config_file: file,
        current: flags.use,
      };
      if (format === 'table') {
        process.stdout.write(
          `logged in to ${url} as ${me.subject} (tenant ${me.tenant_id}, role ${me.role}) with the token from ${from}\n` +
            `profile "${name}" saved in ${file} (mode 0600)${flags.use ? ' and selected: `leoflow` now works from any folder' : `; use it with --profile ${name}`}\n`,
        );
      } else print(format, out);
    });
}
