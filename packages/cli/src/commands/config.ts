import { readFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import {
  checkProfileName,
  cliConfigPath,
  loadCliConfig,
  normaliseUrl,
  saveCliConfig,
  type CliConfig,
  type Profile,
} from '../cli-config.js';
import { CliError } from '../client.js';
import { selectProfile } from '../global-options.js';
import { OUTPUT_FORMATS, parseOutput, print } from '../output.js';

interface SetProfileFlags {
  url?: string;
  token?: string;
  tokenFile?: string;
  clearToken?: boolean;
  output?: string;
}

/** What is shown of a profile: never the token itself. */
function view(name: string, p: Profile, current: string | undefined): Record<string, unknown> {
  return {
    name,
    current: name === current,
    url: p.url,
    token: p.token ? 'set' : null,
    output: p.output ?? null,
  };
}

const COLUMNS = ['name', 'current', 'url', 'token', 'output'];

export function readTokenFile(file: string): string {
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new CliError(
      `cannot read --token-file ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      2,
      'LF_USAGE',
    );
  }
  const token = text.trim();
  if (!token || /\s/.test(token)) {
    throw new CliError(
      `--token-file ${file} must hold exactly one token (got ${token ? 'several words' : 'nothing'})`,
      2,
      'LF_USAGE',
    );
  }
  return token;
}

function unknownProfile(name: string, file: string): CliError {
  return new CliError(
    `no profile "${name}" in ${file}; list profiles with \`leoflow config get-profiles\`, ` +
      `or create it with \`leoflow config set-profile ${name} --url <url>\``,
    1,
    'LF_PROFILE_NOT_FOUND',
  );
}

export function registerConfig(program: Command): void {
  const config = program
    .command('config')
    .description('named profiles (URL, token, output format) for the CLI itself')
    .addHelpText(
      'after',
      '\nProfiles live in $LEOFLOW_CLI_CONFIG, else $XDG_CONFIG_HOME/leoflow/config.yaml, else\n' +
        '~/.config/leoflow/config.yaml (mode 0600). Pick one per command with --profile <name> or\n' +
        'LEOFLOW_PROFILE. Precedence: --url > LEOFLOW_URL > profile url; --token > LEOFLOW_TOKEN >\n' +
        "profile token > ./.leoflow/admin.token (never sent to a profile's non-loopback URL);\n" +
        '-o > profile output > table. Only current-profile looks at --profile here.',
    );

  config
    .command('set-profile <name>')
    .description('create a profile, or change the given fields of an existing one')
    .option('--url <url>', 'control-plane URL, e.g. https://leoflow.example.com (needed to create)')
    .option(
      '--token <token>',
      'API token (a flag can show in shell history and `ps`; prefer --token-file)',
    )
    .option('--token-file <file>', 'read the API token from this file ("-" for standard input)')
    .option('--clear-token', 'remove the stored token')
    .addOption(
      new Option('-o, --output <format>', "the profile's default output format").choices(
        OUTPUT_FORMATS,
      ),
    )
    .action((name: string, own: SetProfileFlags, cmd: Command) => {
      checkProfileName(name);
      // --url, --token and -o are also root options, which commander fills first: read both.
      const all = cmd.optsWithGlobals<SetProfileFlags>();
      const outputGiven = cmd.getOptionValueSourceWithGlobals('output') === 'cli';
      const url = own.url ?? all.url;
      const token = own.token ?? all.token;
      const output = outputGiven ? (own.output ?? all.output) : undefined;
      const given = [token !== undefined, own.tokenFile !== undefined, own.clearToken === true];
      if (given.filter(Boolean).length > 1) {
        throw new CliError('give one of --token, --token-file or --clear-token', 2, 'LF_USAGE');
      }
      const file = cliConfigPath();
      const cfg = loadCliConfig(file);
      const existing = cfg.profiles[name];
      if (!existing && url === undefined) {
        throw new CliError(
          `profile "${name}" does not exist yet; create it with --url, e.g. \`leoflow config set-profile ${name} --url https://leoflow.example.com --token-file <file>\``,
          2,
          'LF_USAGE',
        );
      }
      const next: Profile = { ...(existing ?? { url: '' }) };
      if (url !== undefined) next.url = normaliseUrl(url, '--url');
      if (token !== undefined) {
        if (!token.trim()) throw new CliError('--token must not be empty', 2, 'LF_USAGE');
        next.token = token.trim();
      }
      if (own.tokenFile !== undefined) next.token = readTokenFile(own.tokenFile);
      if (own.clearToken) delete next.token;
      if (output !== undefined) next.output = parseOutput(output);
      cfg.profiles[name] = next;
      saveCliConfig(cfg, file);
      const shown = view(name, next, cfg.current_profile);
      const format = parseOutput(output);
      if (format !== 'table') return print(format, shown);
      process.stdout.write(`${existing ? 'updated' : 'created'} profile ${name} in ${file}\n`);
      if (cfg.current_profile !== name) {
        process.stdout.write(
          `use it with \`leoflow config use-profile ${name}\`, or for one command with --profile ${name}\n`,
        );
      }
    });

  config
    .command('use-profile <name>')
    .description('make a profile the default for every command')
    .action((name: string, _flags: unknown, cmd: Command) => {
      const file = cliConfigPath();
      const cfg = loadCliConfig(file);
      if (!cfg.profiles[name]) throw unknownProfile(name, file);
      cfg.current_profile = name;
      saveCliConfig(cfg, file);
      const format = parseOutput(explicitOutput(cmd));
      if (format !== 'table') return print(format, { current_profile: name });
      process.stdout.write(`now using profile ${name} (${cfg.profiles[name]?.url ?? ''})\n`);
    });

  config
    .command('get-profiles')
    .description('list profiles (tokens are never shown: "set" or "-")')
    .action((_flags: unknown, cmd: Command) => {
      const file = cliConfigPath();
      const cfg = loadCliConfig(file);
      const rows = Object.entries(cfg.profiles).map(([name, p]) =>
        view(name, p, cfg.current_profile),
      );
      const format = parseOutput(explicitOutput(cmd));
      if (format === 'table') {
        if (rows.length === 0) {
          process.stdout.write(
            `no profiles in ${file}; create one with \`leoflow config set-profile <name> --url <url>\`\n`,
          );
          return;
        }
        return print(format, rows, {
          rows: rows.map((r) => ({ ...r, current: r.current ? '*' : '' })),
          columns: COLUMNS,
        });
      }
      print(format, {
        config_file: file,
        current_profile: cfg.current_profile ?? null,
        profiles: rows,
      });
    });

  config
    .command('current-profile')
    .description('the profile commands use now (--profile, LEOFLOW_PROFILE or use-profile)')
    .action((_flags: unknown, cmd: Command) => {
      const file = cliConfigPath();
      const cfg = loadCliConfig(file);
      const g = cmd.optsWithGlobals<{ profile?: string }>();
      const from = cmd.getOptionValueSourceWithGlobals('profile') === 'env' ? 'env' : 'flag';
      const selected = selectProfile(
        { ...(g.profile ? { profile: g.profile } : {}), profileFrom: from },
        process.env,
        cfg,
        file,
      );
      if (!selected) {
        throw new CliError(
          'no profile selected; pick one with `leoflow config use-profile <name>` ' +
            '(list them with `leoflow config get-profiles`)',
          1,
          'LF_PROFILE_NOT_SET',
        );
      }
      const format = parseOutput(explicitOutput(cmd));
      const source = { flag: '--profile', env: 'LEOFLOW_PROFILE', config: file }[selected.from];
      if (format !== 'table') return print(format, { current_profile: selected.name, source });
      process.stdout.write(`${selected.name}\n`);
    });

  config
    .command('delete-profile <name>')
    .description('remove a profile (and its token) from the config file')
    .action((name: string, _flags: unknown, cmd: Command) => {
      const file = cliConfigPath();
      const cfg: CliConfig = loadCliConfig(file);
      if (!cfg.profiles[name]) throw unknownProfile(name, file);
      delete cfg.profiles[name];
      const wasCurrent = cfg.current_profile === name;
      if (wasCurrent) delete cfg.current_profile;
      saveCliConfig(cfg, file);
      const format = parseOutput(explicitOutput(cmd));
      if (format !== 'table') return print(format, { deleted: name, was_current: wasCurrent });
      process.stdout.write(
        `deleted profile ${name}${wasCurrent ? '; no profile is current now' : ''}\n`,
      );
    });
}

/** The config commands print in -o when given; they do not apply a profile's output. */
function explicitOutput(cmd: Command): string | undefined {
  return cmd.getOptionValueSourceWithGlobals('output') === 'cli'
    ? cmd.optsWithGlobals<{ output?: string }>().output
    : undefined;
}
