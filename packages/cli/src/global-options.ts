import type { Command } from 'commander';
import { cliConfigPath, loadCliConfig, type CliConfig } from './cli-config.js';
import { CliError, type TokenSource, type UrlSource } from './client.js';

export interface GlobalOptions {
  url?: string;
  token?: string;
  /** -o when given, else the profile's output, else undefined (parseOutput makes that table). */
  output?: string;
  dataDir?: string;
  /** The profile in use, if any, and the file it came from. */
  profile?: string;
  configFile?: string;
  urlSource?: UrlSource;
  tokenSource?: TokenSource;
}

/** What the command line said; `output` only when -o was given (its commander default is not). */
export interface GlobalFlags {
  url?: string;
  token?: string;
  output?: string;
  profile?: string;
  profileFrom?: 'flag' | 'env';
  dataDir?: string;
}

export type ProfileSelection = { name: string; from: 'flag' | 'env' | 'config' } | undefined;

/** Options declared on the root program, seen from any sub-command, with the profile applied. */
export function globalOpts(cmd: Command): GlobalOptions {
  const raw = cmd.optsWithGlobals<GlobalFlags>();
  return resolveGlobals({
    ...raw,
    output: cmd.getOptionValueSourceWithGlobals('output') === 'cli' ? raw.output : undefined,
    profileFrom: cmd.getOptionValueSourceWithGlobals('profile') === 'env' ? 'env' : 'flag',
  });
}

/**
 * url: --url > LEOFLOW_URL > profile url (> the client's default);
 * token: --token > LEOFLOW_TOKEN > profile token (> the client's local admin token);
 * output: -o > profile output (> table).
 */
export function resolveGlobals(
  flags: GlobalFlags,
  env: NodeJS.ProcessEnv = process.env,
  file: string = cliConfigPath(env),
): GlobalOptions {
  const config = loadCliConfig(file);
  const selected = selectProfile(flags, env, config, file);
  const profile = selected ? config.profiles[selected.name] : undefined;
  const envUrl = env.LEOFLOW_URL || undefined;
  const envToken = env.LEOFLOW_TOKEN || undefined;

  const out: GlobalOptions = { configFile: file };
  if (flags.dataDir !== undefined) out.dataDir = flags.dataDir;
  if (selected) out.profile = selected.name;

  if (flags.url !== undefined) [out.url, out.urlSource] = [flags.url, 'flag'];
  else if (envUrl) [out.url, out.urlSource] = [envUrl, 'env'];
  else if (profile) [out.url, out.urlSource] = [profile.url, 'profile'];
  else out.urlSource = 'default';

  if (flags.token !== undefined) [out.token, out.tokenSource] = [flags.token, 'flag'];
  else if (envToken) [out.token, out.tokenSource] = [envToken, 'env'];
  else if (profile?.token) [out.token, out.tokenSource] = [profile.token, 'profile'];

  const output = flags.output ?? profile?.output;
  if (output !== undefined) out.output = output;
  return out;
}

/** --profile (or LEOFLOW_PROFILE) for one command, else the config's current_profile. */
export function selectProfile(
  flags: Pick<GlobalFlags, 'profile' | 'profileFrom'>,
  env: NodeJS.ProcessEnv,
  config: CliConfig,
  file: string,
): ProfileSelection {
  let selected: ProfileSelection;
  if (flags.profile) selected = { name: flags.profile, from: flags.profileFrom ?? 'flag' };
  else if (env.LEOFLOW_PROFILE) selected = { name: env.LEOFLOW_PROFILE, from: 'env' };
  else if (config.current_profile) selected = { name: config.current_profile, from: 'config' };
  if (selected && !config.profiles[selected.name]) {
    const via = selected.from === 'env' ? 'LEOFLOW_PROFILE' : '--profile';
    throw new CliError(
      `${via} names profile "${selected.name}", which ${file} does not have; ` +
        'list profiles with `leoflow config get-profiles`, or create it with ' +
        `\`leoflow config set-profile ${selected.name} --url <url>\``,
      1,
      'LF_PROFILE_NOT_FOUND',
    );
  }
  return selected;
}
