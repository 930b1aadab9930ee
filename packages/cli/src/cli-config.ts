import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseDocument, stringify } from 'yaml';
import { CliError } from './client.js';
import { OUTPUT_FORMATS, isOutputFormat, type OutputFormat } from './output.js';

/** One named control plane: where it is, how to authenticate, how to print. */
export interface Profile {
  url: string;
  token?: string;
  output?: OutputFormat;
}

/** The CLI's own settings file (not the server's --config). */
export interface CliConfig {
  current_profile?: string;
  profiles: Record<string, Profile>;
}

const PROFILE_KEYS = ['url', 'token', 'output'];
const TOP_KEYS = ['current_profile', 'profiles'];
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/** $LEOFLOW_CLI_CONFIG, else $XDG_CONFIG_HOME/leoflow/config.yaml, else ~/.config/leoflow/config.yaml. */
export function cliConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.LEOFLOW_CLI_CONFIG) return env.LEOFLOW_CLI_CONFIG;
  const base = env.XDG_CONFIG_HOME || join(homedir(), '.config');
  return join(base, 'leoflow', 'config.yaml');
}

export function checkProfileName(name: string): void {
  if (!NAME.test(name)) {
    throw new CliError(
      `profile name "${name}" is not allowed; use letters, digits, ".", "_" and "-" (e.g. prod, staging-eu)`,
      2,
      'LF_USAGE',
    );
  }
}

/** An http(s) URL without a trailing slash, or a usage error naming the flag. */
export function normaliseUrl(value: string, setting: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new CliError(
      `${setting} must be an http(s) URL like https://leoflow.example.com (got "${value}")`,
      2,
      'LF_USAGE',
    );
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new CliError(
      `${setting} must be an http:// or https:// URL (got "${value}")`,
      2,
      'LF_USAGE',
    );
  }
  return value.replace(/\/+$/, '');
}

function invalid(file: string, problem: string): CliError {
  return new CliError(
    `the CLI config file ${file} is not usable: ${problem}. Fix it by hand, or move it away and ` +
      'recreate your profiles with `leoflow config set-profile <name> --url <url>` ' +
      '(LEOFLOW_CLI_CONFIG points the CLI at another file)',
    1,
    'LF_CLI_CONFIG_INVALID',
  );
}

const warnedOpenModes = new Set<string>();

/** Reads the config file; a missing file is an empty config, a malformed one an exit-1 error. */
export function loadCliConfig(file: string = cliConfigPath()): CliConfig {
  if (!existsSync(file)) return { profiles: {} };
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw invalid(file, `cannot read it (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const doc = parseDocument(text);
  const yamlError = doc.errors[0];
  if (yamlError) throw invalid(file, `it is not valid YAML (${firstLine(yamlError.message)})`);
  const raw: unknown = doc.toJS();
  if (raw === null || raw === undefined) return { profiles: {} };
  const config = validate(file, raw);
  warnIfReadableByOthers(file, config);
  return config;
}

function validate(file: string, raw: unknown): CliConfig {
  if (!isMapping(raw)) {
    throw invalid(file, 'it must be a mapping with current_profile and profiles');
  }
  for (const key of Object.keys(raw)) {
    if (!TOP_KEYS.includes(key))
      throw invalid(file, `unknown key "${key}" (allowed: ${TOP_KEYS.join(', ')})`);
  }
  const profiles: Record<string, Profile> = {};
  const rawProfiles = raw.profiles ?? {};
  if (!isMapping(rawProfiles)) {
    throw invalid(file, '"profiles" must be a mapping of name → {url, token, output}');
  }
  for (const [name, p] of Object.entries(rawProfiles)) {
    const where = `profiles.${name}`;
    if (!NAME.test(name)) throw invalid(file, `${where}: not an allowed profile name`);
    if (!isMapping(p))
      throw invalid(file, `${where} must be a mapping with url (and token, output)`);
    for (const key of Object.keys(p)) {
      if (!PROFILE_KEYS.includes(key))
        throw invalid(file, `${where}: unknown key "${key}" (allowed: ${PROFILE_KEYS.join(', ')})`);
    }
    if (typeof p.url !== 'string' || !/^https?:\/\/\S+$/.test(p.url))
      throw invalid(file, `${where}.url must be an http(s) URL`);
    if (p.token !== undefined && p.token !== null && typeof p.token !== 'string')
      throw invalid(file, `${where}.token must be a string`);
    if (p.output !== undefined && p.output !== null && !isOutputFormat(p.output))
      throw invalid(file, `${where}.output must be one of ${OUTPUT_FORMATS.join(', ')}`);
    profiles[name] = {
      url: p.url.replace(/\/+$/, ''),
      ...(typeof p.token === 'string' && p.token !== '' ? { token: p.token } : {}),
      ...(isOutputFormat(p.output) ? { output: p.output } : {}),
    };
  }
  const current = raw.current_profile;
  if (current !== undefined && current !== null) {
    if (typeof current !== 'string') throw invalid(file, 'current_profile must be a profile name');
    if (!profiles[current]) {
      throw invalid(
        file,
        `current_profile "${current}" is not one of its profiles (${Object.keys(profiles).join(', ') || 'none'})`,
      );
    }
    return { current_profile: current, profiles };
  }
  return { profiles };
}

/**
 * Writes the whole file, mode 0600, through a temporary file and a rename so a crash never leaves
 * half a file. Folders it has to create are made 0700; existing ones are left as they are.
 */
export function saveCliConfig(config: CliConfig, file: string = cliConfigPath()): void {
  const dir = dirname(file);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ordered: Record<string, unknown> = {};
  if (config.current_profile) ordered.current_profile = config.current_profile;
  ordered.profiles = Object.fromEntries(
    Object.entries(config.profiles)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, p]) => [
        name,
        {
          url: p.url,
          ...(p.token ? { token: p.token } : {}),
          ...(p.output ? { output: p.output } : {}),
        },
      ]),
  );
  const text =
    '# Leoflow CLI profiles; written by `leoflow config …` (mode 0600: it may hold tokens)\n' +
    stringify(ordered);
  const tmp = join(dir, `.config.yaml.${process.pid}.${Date.now()}.tmp`);
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
  try {
    chmodSync(tmp, 0o600);
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw new CliError(
      `cannot write the CLI config file ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'}); ` +
        'set LEOFLOW_CLI_CONFIG to a writable path',
      1,
      'LF_CLI_CONFIG_UNWRITABLE',
    );
  }
}

/** Like ssh: a token in a file others can read is worth a warning (once per process). */
function warnIfReadableByOthers(file: string, config: CliConfig): void {
  if (process.platform === 'win32' || warnedOpenModes.has(file)) return;
  if (!Object.values(config.profiles).some((p) => p.token)) return;
  const mode = statSync(file).mode & 0o777;
  if ((mode & 0o077) === 0) return;
  warnedOpenModes.add(file);
  process.stderr.write(
    `warning: ${file} holds API tokens but is readable by others (mode ${mode.toString(8)}); run chmod 600 ${file}\n`,
  );
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function firstLine(s: string): string {
  return (s.split('\n')[0] ?? s).trim().replace(/:$/, '');
}
