import type { Command } from 'commander';
import {
  describeSettingDefault,
  flagProperty,
  isLeoflowError,
  loadSettings,
  settingsOf,
  type ResolvedSettings,
  type SettingCommand,
} from '@leoflow/core';
import { CliError } from './client.js';

/**
 * Adds a command's settings as flags, generated from core's settings table: the same names,
 * help and defaults that docs/configuration.md lists and `leoflow doctor` reports.
 */
export function addSettingOptions(cmd: Command, command: SettingCommand): Command {
  for (const spec of settingsOf(command)) {
    const flag = spec.flags[command]!;
    const def = describeSettingDefault(spec);
    cmd.option(flag, def === null ? spec.help : `${spec.help} (default ${def})`);
  }
  return cmd;
}

/**
 * A command's settings: defaults < config file (--config / LEOFLOW_CONFIG_FILE) < env < flags,
 * every problem refused at once (exit 2) with the key and where its value came from.
 */
export async function commandSettings(
  command: SettingCommand,
  flags: Record<string, unknown>,
  env: Record<string, string | undefined> = process.env,
): Promise<{ settings: ResolvedSettings; file: Record<string, unknown> | undefined }> {
  const byKey: Record<string, unknown> = {};
  for (const spec of settingsOf(command)) {
    const value = flags[flagProperty(spec.flags[command]!)];
    if (value !== undefined) byKey[spec.key] = value;
  }
  const configFile = (byKey['config_file'] as string | undefined) ?? env.LEOFLOW_CONFIG_FILE;
  const file = configFile ? await readConfigFile(configFile) : undefined;
  try {
    return { settings: loadSettings({ ...(file ? { file } : {}), env, flags: byKey }), file };
  } catch (err) {
    if (isLeoflowError(err)) throw new CliError(err.message, 2, err.code);
    throw err;
  }
}

async function readConfigFile(file: string): Promise<Record<string, unknown>> {
  const { readFile } = await import('node:fs/promises');
  const { parse } = await import('yaml');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new CliError(
      `cannot read the config file ${file}; check the path given to --config / LEOFLOW_CONFIG_FILE`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  const parsed: unknown = parse(text);
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new CliError(
      `${file} must be a YAML mapping of settings (e.g. "auth:\n  secret_scoping: enforce")`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  return parsed as Record<string, unknown>;
}
