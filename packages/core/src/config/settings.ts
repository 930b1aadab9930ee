import { ConfigError } from '../errors/leoflow-error.js';
import {
  CREDENTIAL_PLANE_KEYS,
  DEFAULT_CREDENTIAL_PLANE_CONFIG,
  envNameForKey,
  resolveConfig,
  validateConfig,
  type ConfigProblem,
  type ConfigSource,
  type CredentialPlaneConfig,
} from './credential-plane.js';
import { formatDuration, parseDuration } from './duration.js';
import {
  DEFAULT_ATTEMPT_NPROC_LIMIT,
  DEFAULT_ATTEMPT_UID_RANGE,
  DEFAULT_ISOLATION_MODE,
  DEFAULT_NETWORK_MODE,
  DEFAULT_SANDBOX_TMPFS_SIZE,
  parseNprocLimit,
  parseUidRange,
  parseWritablePaths,
} from './attempt-isolation.js';

/**
 * Every setting of a Leoflow process, in one table: its key (the config file's dotted path), the
 * flag on each command that takes it, its LEOFLOW_ environment name, its type, default and
 * validation, and the doctor section that shows it. `leoflow standalone`, `server`, `door` and
 * `doctor` generate their flags and help from here; one resolver applies defaults < config file <
 * env < flags and records where each value came from (docs/configuration.md).
 */

export type SettingCommand = 'standalone' | 'server' | 'door';

/** How a value is written and checked. */
export type SettingKind =
  | 'string'
  | 'path'
  | 'port'
  | 'duration'
  | 'boolean'
  | 'enum'
  | 'integer'
  | 'bytes'
  | 'url'
  | 'list';

/** Where `leoflow doctor` shows a setting. */
export type SettingSection =
  | 'process'
  | 'listeners'
  | 'storage'
  | 'credential plane'
  | 'execution'
  | 'logs'
  | 'runners'
  | 'pro';

export interface SettingSpec {
  key: string;
  /** the flag (commander syntax) on each command that takes it */
  flags: Partial<Record<SettingCommand, string>>;
  /** the environment variable; envNameForKey(key) when absent */
  env?: string;
  kind: SettingKind;
  /** enum: the values it takes */
  allowed?: readonly string[];
  /** integer and bytes: the range */
  min?: number;
  max?: number;
  /** the default, spelled as an operator writes it; null: unset */
  default: string | null;
  /** values that turn the setting off (its value is then null) */
  off?: readonly string[];
  /** url, and each item of a list of URLs: what the URL must look like, and the sentence that says so */
  pattern?: { re: RegExp; expect: string };
  help: string;
  section: SettingSection;
  /** its value is never shown (doctor redacts it) */
  secret?: boolean;
  /** where the config file is found, not a setting the file itself may hold */
  notInFile?: boolean;
  /**
   * The credential plane's keys: parsed and validated by credential-plane.ts (its timing ladder,
   * its did-you-mean on values), which resolveSettings calls for them.
   */
  credentialPlane?: true;
  /**
   * Reserved for a feature this build does not have yet: the key is known (never an unknown key,
   * never silently dropped) and setting it is refused with this sentence.
   */
  reserved?: string;
}

const BOTH: readonly SettingCommand[] = ['standalone', 'server'];
const both = (flag: string): Partial<Record<SettingCommand, string>> =>
  Object.fromEntries(BOTH.map((c) => [c, flag]));
const AGENT_URL = { re: /^https?:\/\/[^/]+/, expect: 'an http(s):// URL agents can dial' };

const CREDENTIAL_FLAGS: Record<string, string> = {
  'auth.secret_scoping': '--secret-scoping <mode>',
  'auth.secret_liveness_mode': '--secret-liveness-mode <mode>',
  'auth.max_attempt_credential_lifetime': '--max-attempt-credential-lifetime <duration>',
  'execution.heartbeat_interval': '--heartbeat-interval <duration>',
  'execution.agent_lost_threshold': '--agent-lost-threshold <duration>',
};

/** The credential plane's keys (credential-plane.ts owns their meaning and validation). */
const CREDENTIAL_SETTINGS: SettingSpec[] = CREDENTIAL_PLANE_KEYS.map((spec) => {
  const value: unknown = DEFAULT_CREDENTIAL_PLANE_CONFIG[spec.field];
  const flag = CREDENTIAL_FLAGS[spec.key];
  return {
    key: spec.key,
    flags: flag ? both(flag) : {},
    kind: spec.kind,
    ...(spec.kind === 'enum' ? { allowed: spec.allowed } : {}),
    default: spec.kind === 'duration' ? formatDuration(value as number) : String(value),
    help: spec.description,
    section: spec.key.startsWith('execution.') ? 'execution' : 'credential plane',
    credentialPlane: true,
  };
});

export const SETTINGS: readonly SettingSpec[] = Object.freeze([
  // --- the process
  {
    key: 'data_dir',
    flags: both('--data-dir <dir>'),
    kind: 'path',
    default: '.leoflow',
    help: 'data directory (database, keys, admin token)',
    section: 'process',
    notInFile: true,
  },
  {
    key: 'config_file',
    flags: both('--config <file>'),
    kind: 'path',
    default: null,
    help: 'the configuration file, YAML: any key of this table (docs/configuration.md)',
    section: 'process',
    notInFile: true,
  },
  {
    key: 'log.level',
    flags: { ...both('--log-level <level>'), door: '--log-level <level>' },
    kind: 'enum',
    allowed: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'],
    default: 'info',
    help: 'server log level',
    section: 'process',
  },
  // --- listeners
  {
    key: 'http.host',
    flags: both('--host <host>'),
    kind: 'string',
    default: '127.0.0.1',
    help: 'REST API listen address',
    section: 'listeners',
  },
  {
    key: 'http.port',
    flags: both('--http-port <port>'),
    kind: 'port',
    default: '8080',
    help: 'REST API port (0 picks a free one)',
    section: 'listeners',
  },
  {
    key: 'agent.host',
    flags: both('--agent-host <host>'),
    kind: 'string',
    default: '127.0.0.1',
    help: 'agent RPC listen address',
    section: 'listeners',
  },
  {
    key: 'agent.port',
    flags: both('--agent-port <port>'),
    kind: 'port',
    default: '8793',
    help: 'agent RPC port (0 picks a free one)',
    section: 'listeners',
  },
  {
    key: 'agent.advertise_url',
    flags: both('--agent-advertise-url <urls>'),
    kind: 'list',
    pattern: AGENT_URL,
    default: null,
    help: "the URLs agents dial, comma-separated: every replica's agent URL, or one address that reaches them all (a Service); an agent whose replica goes away carries on with another URL of the list",
    section: 'listeners',
  },
  {
    key: 'agent.tls.cert',
    flags: both('--agent-tls-cert <pem>'),
    kind: 'path',
    default: null,
    help: 'serve the agent RPC over TLS with this certificate',
    section: 'listeners',
  },
  {
    key: 'agent.tls.key',
    flags: both('--agent-tls-key <pem>'),
    kind: 'path',
    default: null,
    help: 'the private key for --agent-tls-cert',
    section: 'listeners',
  },
  {
    key: 'agent.tls.ca',
    flags: both('--agent-tls-ca <pem>'),
    kind: 'path',
    default: null,
    help: 'CA bundle agents use to verify the certificate (when not publicly trusted)',
    section: 'listeners',
  },
  {
    key: 'metrics.port',
    flags: both('--metrics-port <port>'),
    kind: 'port',
    off: ['off'],
    default: '9464',
    help: 'Prometheus /metrics listener on 127.0.0.1 (0 picks a free one, off disables it)',
    section: 'listeners',
  },
  // --- storage
  {
    key: 'database.url',
    flags: { ...both('--database-url <url>'), door: '--database-url <url>' },
    kind: 'url',
    pattern: { re: /^postgres(ql)?:\/\//, expect: 'a postgres:// URL' },
    default: null,
    help: 'use PostgreSQL instead of the embedded SQLite file',
    section: 'storage',
    secret: true,
  },
  {
    key: 'database.schema',
    flags: both('--database-schema <schema>'),
    kind: 'string',
    default: null,
    help: "PostgreSQL: the schema of this cell's store (default public); each cell sharing one database needs its own",
    section: 'storage',
  },
  {
    key: 'directory.schema',
    flags: { ...both('--directory-schema <schema>'), door: '--directory-schema <schema>' },
    kind: 'string',
    default: 'leoflow_directory',
    help: 'PostgreSQL: the schema of the directory (runners, cells, placements)',
    section: 'storage',
  },
  {
    key: 'directory.file',
    flags: { door: '--directory-file <file>' },
    kind: 'path',
    default: null,
    help: "the door's directory: a Lite installation's SQLite file (instead of --database-url)",
    section: 'storage',
  },
  {
    key: 'vault.seed',
    flags: both('--vault-seed <dir>'),
    kind: 'path',
    default: null,
    help: 'at start, import connections.json / variables.json (Airflow export format) from <dir> for names not yet defined',
    section: 'storage',
  },
  {
    key: 'dags.folder',
    flags: both('--dags-folder <dir>'),
    kind: 'path',
    default: null,
    help: 'load every DAG folder (with leoflow.yaml) under this folder, and keep watching it: new, changed, removed and broken DAGs are picked up within seconds',
    section: 'execution',
  },
  {
    key: 'dags.paused_at_creation',
    flags: both('--dags-paused-at-creation <true|false>'),
    kind: 'boolean',
    default: 'true',
    help: 'a DAG registered for the first time (pushed or found in the DAGs folder) starts paused, as in Airflow: no scheduled run until `leoflow dags unpause <dag_id>` (a manual trigger still runs); false starts new DAGs unpaused',
    section: 'execution',
  },
  // --- the credential plane and the run loop
  ...CREDENTIAL_SETTINGS,
  {
    key: 'execution.dispatch_lost_threshold',
    flags: both('--dispatch-lost-threshold <duration>'),
    kind: 'duration',
    default: '3m',
    help: 'fail attempts whose agent never started',
    section: 'execution',
  },
  {
    key: 'execution.attempt_uid_range',
    flags: both('--attempt-uid-range <first-last|off>'),
    kind: 'string',
    off: ['off'],
    default: DEFAULT_ATTEMPT_UID_RANGE,
    help: 'when root, run every attempt under its own uid/gid from this range, which no account may use ("off" uses --run-as-user)',
    section: 'execution',
  },
  {
    key: 'execution.attempt_nproc_limit',
    flags: both('--attempt-nproc-limit <n>'),
    kind: 'integer',
    min: 0,
    default: String(DEFAULT_ATTEMPT_NPROC_LIMIT),
    help: 'RLIMIT_NPROC of each attempt uid, via prlimit (0 does not apply it)',
    section: 'execution',
  },
  {
    key: 'execution.run_as_user',
    flags: both('--run-as-user <user>'),
    kind: 'string',
    off: ['none', ''],
    default: 'nobody',
    help: 'when root and --attempt-uid-range is off, run every task as this one user ("none" disables)',
    section: 'execution',
  },
  {
    key: 'execution.standby_agents',
    flags: both('--standby-agents <n>'),
    kind: 'integer',
    min: 0,
    max: 64,
    default: '2',
    help: 'pre-started, credential-less agents waiting for an attempt (0 starts each on demand)',
    section: 'execution',
  },
  {
    key: 'execution.host_agent',
    flags: both('--host-agent <mode>'),
    kind: 'enum',
    allowed: ['off', 'on'],
    default: 'off',
    help: 'on: Lite runs one long-lived host agent that takes every local attempt and runs each in its own sandbox under its own uid and token (docs/run-loop.md, "The host agent"); off: one agent process per attempt, with standby agents',
    section: 'execution',
  },
  // --- the attempt sandbox (docs/security.md, "The sandbox")
  {
    key: 'execution.isolation',
    flags: both('--isolation <mode>'),
    kind: 'enum',
    allowed: ['auto', 'required', 'fallback'],
    default: DEFAULT_ISOLATION_MODE,
    help: 'the attempt sandbox: namespaces where the host allows them, else per-attempt uids alone (auto), refuse to start without namespaces (required), or per-attempt uids without namespaces (fallback)',
    section: 'execution',
  },
  {
    key: 'execution.network',
    flags: both('--network <mode>'),
    kind: 'enum',
    allowed: ['host', 'none'],
    default: DEFAULT_NETWORK_MODE,
    help: "attempts' network: the host's, or an empty network namespace each (none)",
    section: 'execution',
  },
  {
    key: 'execution.writable_paths',
    flags: both('--writable-path <dirs>'),
    kind: 'list',
    default: null,
    help: 'absolute host directories every attempt may write besides its work dir (bind-mounted read-write; comma-separated); the rest is read-only',
    section: 'execution',
  },
  {
    key: 'execution.tmpfs_size',
    flags: both('--tmpfs-size <bytes>'),
    kind: 'bytes',
    min: 1024 * 1024,
    default: String(DEFAULT_SANDBOX_TMPFS_SIZE),
    help: "the size cap of each attempt's private /tmp, /var/tmp, /dev/shm, /run/lock and every other world-writable dir",
    section: 'execution',
  },
  // --- logs
  {
    key: 'logs.max_line_bytes',
    flags: both('--log-max-line-bytes <n>'),
    kind: 'bytes',
    min: 1,
    default: String(128 * 1024),
    help: 'longer log lines are cut to this many bytes, with a marker',
    section: 'logs',
  },
  {
    key: 'logs.max_bytes_per_attempt',
    flags: both('--log-max-bytes-per-attempt <n>'),
    kind: 'bytes',
    min: 1,
    default: String(256 * 1024 * 1024),
    help: 'log bytes stored per attempt; past it lines are counted in one closing line',
    section: 'logs',
  },
  {
    key: 'logs.write_grace',
    flags: both('--log-write-grace <duration>'),
    kind: 'duration',
    default: '5m',
    help: 'an ended attempt may still write log lines this long',
    section: 'logs',
  },
  // --- runners: the door and this cell
  {
    key: 'door.port',
    flags: { ...both('--door-port <port>'), door: '--port <port>' },
    kind: 'port',
    default: null,
    help: 'run the runner door on its own port (0 picks a free one); nothing else answers under /runners/ (leoflow door: default 8443)',
    section: 'runners',
  },
  {
    key: 'door.host',
    flags: { ...both('--door-host <host>'), door: '--host <host>' },
    kind: 'string',
    default: '127.0.0.1',
    help: 'the door listen address',
    section: 'runners',
  },
  {
    key: 'door.url',
    flags: both('--door-url <url>'),
    kind: 'url',
    pattern: {
      re: /^https?:\/\/[^/]+\/?$/,
      expect: "the door's public base URL, e.g. https://door.example.com",
    },
    default: null,
    help: "the door's public base URL that launch commands name (default: http://<door host>:<port>)",
    section: 'runners',
  },
  {
    key: 'door.data_dir',
    flags: { door: '--data-dir <dir>' },
    kind: 'path',
    default: '.leoflow-door',
    help: "leoflow door: the door's own keys",
    section: 'runners',
    notInFile: true,
  },
  {
    key: 'door.bundle',
    flags: { door: '--bundle <file>' },
    kind: 'path',
    default: null,
    help: 'leoflow door: the runner bundle the bundle path serves',
    section: 'runners',
  },
  {
    key: 'door.keys_file',
    flags: both('--door-keys-file <file>'),
    kind: 'path',
    default: null,
    help: 'the door-public.jwks.json of the doors this cell trusts',
    section: 'runners',
  },
  {
    key: 'cell.port',
    flags: both('--cell-port <port>'),
    kind: 'port',
    default: null,
    help: "this cell's internal endpoint for a separate `leoflow door` (needs --door-keys-file)",
    section: 'runners',
  },
  {
    key: 'cell.name',
    flags: both('--cell-name <name>'),
    kind: 'string',
    default: null,
    help: "this cell's name in the directory: it serves runner sessions only of tenants placed on it",
    section: 'runners',
  },
  // --- Pro
  {
    key: 'server.role',
    flags: { server: '--role <role>' },
    kind: 'enum',
    allowed: ['all', 'api', 'scheduler'],
    default: 'all',
    help: 'all: API and scheduler; api: API and agent RPC, never schedules; scheduler: contends for the scheduler lease, no REST API',
    section: 'pro',
  },
  {
    key: 'keys_dir',
    flags: { server: '--keys-dir <dir>' },
    kind: 'path',
    default: null,
    help: 'signing keyrings and the first admin token, shared by every replica (default: the data dir)',
    section: 'pro',
  },
  {
    key: 'scheduler.lease_ttl',
    flags: { server: '--lease-ttl <duration>' },
    kind: 'duration',
    default: '15s',
    help: 'scheduler lease lifetime in the database',
    section: 'pro',
  },
  {
    key: 'scheduler.lease_renew_interval',
    flags: { server: '--lease-renew-interval <duration>' },
    kind: 'duration',
    default: '5s',
    help: 'how often the leader renews',
    section: 'pro',
  },
  {
    key: 'scheduler.lease_safety_margin',
    flags: { server: '--lease-safety-margin <duration>' },
    kind: 'duration',
    default: '3s',
    help: 'the leader stops this much before its grant expires',
    section: 'pro',
  },
  {
    key: 'server.drain_grace',
    flags: { server: '--drain-grace <duration>' },
    kind: 'duration',
    default: '25s',
    help: 'SIGTERM: time to drain before exiting',
    section: 'pro',
  },
] satisfies SettingSpec[]);

/** Sections of the config file that are read as a whole by their owner (executor.*). */
export const SETTING_SECTIONS_OWNED_ELSEWHERE = ['executor'] as const;

const BY_KEY = new Map(SETTINGS.map((s) => [s.key, s]));

export function settingSpec(key: string): SettingSpec {
  const spec = BY_KEY.get(key);
  if (!spec) throw new Error(`no setting ${key}`);
  return spec;
}

export function envNameOf(spec: SettingSpec): string {
  return spec.env ?? envNameForKey(spec.key);
}

/** The flag's name alone (`--http-port`), for messages. */
export function flagNameOf(spec: SettingSpec, command: SettingCommand): string | undefined {
  return spec.flags[command]?.split(/\s/)[0];
}

/** Commander's property for a flag: `--http-port <port>` → `httpPort`. */
export function flagProperty(flag: string): string {
  const name = flag.split(/\s/)[0]!.replace(/^--/, '');
  return name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** The settings a command takes (its flags), in table order. */
export function settingsOf(command: SettingCommand): SettingSpec[] {
  return SETTINGS.filter((s) => s.flags[command] !== undefined);
}

/** A setting's value after parsing: null is unset or off. */
export type SettingValue = string | number | boolean | readonly string[] | null;

export interface ResolvedSettings {
  values: Record<string, SettingValue>;
  sources: Record<string, ConfigSource>;
  problems: ConfigProblem[];
  /** the credential plane's keys as their own module types them (validated, ladder included) */
  credentials: CredentialPlaneConfig;
}

export interface SettingLayers {
  /** the parsed config file: nested or dotted keys */
  file?: Record<string, unknown>;
  /** usually process.env; only the LEOFLOW_ names of known keys are read */
  env?: Record<string, string | undefined>;
  /** flag values by key; undefined means "not given" */
  flags?: Record<string, unknown>;
}

/**
 * Applies defaults < config file < env < flags over the whole table. Pure: the caller reads the
 * file and passes the environment. Every problem names the key and where its value came from; a
 * process must refuse to start when there is any (loadSettings throws them together).
 */
export function resolveSettings(
  layers: SettingLayers,
  specs: readonly SettingSpec[] = SETTINGS,
): ResolvedSettings {
  const values: Record<string, SettingValue> = {};
  const sources: Record<string, ConfigSource> = {};
  const problems: ConfigProblem[] = [];
  const known = new Map(specs.map((s) => [s.key, s]));
  const own = specs.filter((s) => !s.credentialPlane);
  for (const s of own) {
    // A default the table spells wrong is a bug of this file; the settings test parses each one.
    values[s.key] =
      s.default === null ? null : (parseSetting(s, s.default, 'default').value ?? null);
    sources[s.key] = 'default';
  }
  const credentialFile: Record<string, unknown> = {};
  const credentialFlags: Record<string, unknown> = {};
  const apply = (key: string, raw: unknown, source: ConfigSource) => {
    if (raw === undefined) return;
    const spec = known.get(key);
    if (!spec) {
      problems.push(unknownSetting(key, source, [...known.keys()]));
      return;
    }
    if (spec.credentialPlane) {
      if (source === 'file') credentialFile[key] = raw;
      if (source === 'flags') credentialFlags[key] = raw;
      return;
    }
    if (source === 'file' && spec.notInFile) {
      problems.push({
        key,
        source,
        message: `${key} cannot be set in the config file; pass ${flagList(spec)} or ${envNameOf(spec)}.`,
      });
      return;
    }
    if (spec.reserved) {
      problems.push({
        key,
        source,
        value: raw,
        message: `${spec.reserved} (from ${where(spec, source)}).`,
      });
      return;
    }
    const parsed = parseSetting(spec, raw, source);
    if (parsed.problem) {
      problems.push(parsed.problem);
      return;
    }
    values[key] = parsed.value;
    sources[key] = source;
  };
  if (layers.file) {
    for (const [key, raw] of flattenFile(layers.file)) {
      if (SETTING_SECTIONS_OWNED_ELSEWHERE.some((s) => key === s || key.startsWith(`${s}.`))) {
        continue;
      }
      apply(key, raw, 'file');
    }
  }
  if (layers.env) {
    for (const s of own) {
      const v = layers.env[envNameOf(s)];
      if (v !== undefined) apply(s.key, v, 'env');
    }
  }
  if (layers.flags) for (const [key, raw] of Object.entries(layers.flags)) apply(key, raw, 'flags');
  // The credential plane's keys: its own resolver and validator (the timing ladder, warm-pool
  // prerequisites, did-you-mean on values), over the same layers.
  const credential = resolveConfig({
    file: credentialFile,
    ...(layers.env ? { env: layers.env } : {}),
    flags: credentialFlags,
  });
  problems.push(...credential.problems, ...validateConfig(credential.config, credential.sources));
  for (const spec of CREDENTIAL_PLANE_KEYS) {
    if (!known.has(spec.key)) continue;
    values[spec.key] = credential.config[spec.field];
    sources[spec.key] = credential.sources[spec.key] ?? 'default';
  }
  const resolved = { values, sources, problems, credentials: credential.config };
  problems.push(...settingsProblems(resolved));
  return resolved;
}

/** resolveSettings that refuses: one LF_CONFIG_INVALID error listing every problem. */
export function loadSettings(layers: SettingLayers, specs?: readonly SettingSpec[]) {
  const resolved = resolveSettings(layers, specs);
  if (resolved.problems.length > 0) throw settingsError(resolved.problems);
  return resolved;
}

export function settingsError(problems: readonly ConfigProblem[]): ConfigError {
  return new ConfigError(
    'LF_CONFIG_INVALID',
    `refusing to start: invalid configuration\n${problems.map((p) => `  - ${p.message}`).join('\n')}`,
    { problems: problems.map((p) => ({ key: p.key, message: p.message })) },
  );
}

/** Parses one value of a setting; a problem names the key, the value and its source. */
export function parseSetting(
  spec: SettingSpec,
  raw: unknown,
  source: ConfigSource,
): { value: SettingValue; problem?: undefined } | { value?: undefined; problem: ConfigProblem } {
  const bad = (expect: string) => ({
    problem: {
      key: spec.key,
      value: raw,
      source,
      message: `${spec.key} is ${show(raw)} (from ${where(spec, source)}); ${expect}.`,
    },
  });
  if (raw === null) return { value: null };
  const text = typeof raw === 'string' ? raw.trim() : raw;
  if (typeof text === 'string' && spec.off?.includes(text)) return { value: null };
  switch (spec.kind) {
    case 'string':
    case 'path':
      return typeof text === 'string' || typeof text === 'number'
        ? { value: String(text) }
        : bad('set it to a text value');
    case 'url':
      if (typeof text !== 'string') return bad(`set it to ${spec.pattern?.expect ?? 'a URL'}`);
      return spec.pattern && !spec.pattern.re.test(text)
        ? bad(`set it to ${spec.pattern.expect}`)
        : { value: text };
    case 'enum':
      return typeof text === 'string' && spec.allowed?.includes(text)
        ? { value: text }
        : bad(`allowed values: ${(spec.allowed ?? []).join(', ')}`);
    case 'boolean':
      if (typeof text === 'boolean') return { value: text };
      if (text === 'true' || text === '1' || text === 1) return { value: true };
      if (text === 'false' || text === '0' || text === 0) return { value: false };
      return bad('set it to true or false');
    case 'port': {
      const n = wholeNumber(text);
      return Number.isInteger(n) && n >= 0 && n <= 65535
        ? { value: n }
        : bad('set it to a port number 0-65535 (0 picks a free one)');
    }
    case 'integer':
    case 'bytes': {
      const n = wholeNumber(text);
      const min = spec.min ?? 0;
      const max = spec.max ?? Number.MAX_SAFE_INTEGER;
      const unit = spec.kind === 'bytes' ? ' bytes' : '';
      return Number.isSafeInteger(n) && n >= min && n <= max
        ? { value: n }
        : bad(
            spec.max !== undefined
              ? `set it to a whole number ${min}-${max}${unit}`
              : `set it to a whole number of at least ${min}${unit}`,
          );
    }
    case 'duration':
      try {
        return { value: parseDuration(text, spec.key) };
      } catch {
        return bad(
          'set it to a duration such as 90s, 15m, 24h, 30d, 500ms, or a number of seconds',
        );
      }
    case 'list': {
      let items: string[];
      if (Array.isArray(text) && text.every((v) => typeof v === 'string')) {
        items = text.map((s) => s.trim()).filter((s) => s !== '');
      } else if (typeof text === 'string') {
        items = text
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== '');
      } else {
        return bad('set it to a list, or a comma-separated string');
      }
      // A list of URLs (agent.advertise_url): each item is held to the pattern, and nothing at
      // all is "unset" rather than a list agents could never dial.
      if (spec.pattern) {
        const wrong = items.find((i) => !spec.pattern!.re.test(i));
        if (wrong !== undefined)
          return bad(`set each item to ${spec.pattern.expect} (${show(wrong)} is not)`);
        if (items.length === 0) return { value: null };
      }
      return { value: items };
    }
  }
}

/**
 * Checks across settings, and the shapes a single kind cannot express (a uid range, an nproc
 * limit): every problem names the key to change.
 */
export function settingsProblems(r: Pick<ResolvedSettings, 'values' | 'sources'>): ConfigProblem[] {
  const v = r.values;
  const out: ConfigProblem[] = [];
  const at = (key: string) => ({ key, source: r.sources[key] ?? 'default' });
  const range = v['execution.attempt_uid_range'];
  if (typeof range === 'string') {
    try {
      parseUidRange(range);
    } catch (err) {
      out.push({ ...at('execution.attempt_uid_range'), message: (err as Error).message });
    }
  }
  const nproc = v['execution.attempt_nproc_limit'];
  if (typeof nproc === 'number') {
    try {
      parseNprocLimit(String(nproc));
    } catch (err) {
      out.push({ ...at('execution.attempt_nproc_limit'), message: (err as Error).message });
    }
  }
  const writable = v['execution.writable_paths'];
  if (Array.isArray(writable)) {
    try {
      parseWritablePaths(writable as string[]);
    } catch (err) {
      out.push({ ...at('execution.writable_paths'), message: (err as Error).message });
    }
  }
  if ((v['agent.tls.cert'] === null) !== (v['agent.tls.key'] === null)) {
    out.push({
      ...at('agent.tls.cert'),
      message:
        'agent TLS needs both --agent-tls-cert and --agent-tls-key (LEOFLOW_AGENT_TLS_CERT / LEOFLOW_AGENT_TLS_KEY)',
    });
  }
  if (v['database.schema'] !== null && v['database.url'] === null) {
    out.push({
      ...at('database.schema'),
      message:
        '--database-schema needs --database-url (a PostgreSQL store); Lite keeps everything in its SQLite file',
    });
  }
  if (v['database.url'] !== null && (v['database.schema'] ?? 'public') === v['directory.schema']) {
    out.push({
      ...at('directory.schema'),
      message: `--database-schema and --directory-schema are both "${String(v['directory.schema'])}": give the cell's store a schema of its own`,
    });
  }
  const grace = v['logs.write_grace'];
  if (typeof grace === 'number' && grace <= 0) {
    out.push({
      ...at('logs.write_grace'),
      message: 'logs.write_grace must be a positive duration such as 5m',
    });
  }
  const ttl = v['scheduler.lease_ttl'];
  const renew = v['scheduler.lease_renew_interval'];
  const margin = v['scheduler.lease_safety_margin'];
  if (typeof ttl === 'number' && typeof renew === 'number' && typeof margin === 'number') {
    if (renew + margin >= ttl) {
      out.push({
        ...at('scheduler.lease_renew_interval'),
        message: `scheduler.lease_renew_interval (${Math.round(renew * 1000)} ms) + scheduler.lease_safety_margin (${Math.round(margin * 1000)} ms) must be below scheduler.lease_ttl (${Math.round(ttl * 1000)} ms): the leader renews at least once before its deadline`,
      });
    }
  }
  return out;
}

/** A value as `leoflow doctor` shows it (secrets redacted). */
export function displaySetting(spec: SettingSpec, value: SettingValue): string {
  if (value === null) return spec.off?.[0] ?? '(unset)';
  if (spec.secret) return redactUrlPassword(String(value));
  if (spec.kind === 'duration' && typeof value === 'number') return formatDuration(value);
  if (Array.isArray(value)) return value.join(', ');
  return String(value);
}

function redactUrlPassword(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@]*@/i, '$1:***@');
}

function flagList(spec: SettingSpec): string {
  const names = [...new Set(Object.values(spec.flags).map((f) => f.split(/\s/)[0]))];
  return names.length > 0 ? names.join(' / ') : `the ${spec.key} key`;
}

function where(spec: SettingSpec, source: ConfigSource): string {
  switch (source) {
    case 'env':
      return `env ${envNameOf(spec)}`;
    case 'file':
      return 'the config file';
    case 'flags':
      return `${flagList(spec)}`;
    case 'default':
      return 'the default';
  }
}

function unknownSetting(
  key: string,
  source: ConfigSource,
  known: readonly string[],
): ConfigProblem {
  const last = key.split('.').pop();
  const near = known.find((k) => k.split('.').pop() === last);
  return {
    key,
    source,
    message: `unknown configuration key ${key} in the ${source === 'file' ? 'config file' : source}${near ? `; did you mean ${near}?` : '; it is not a Leoflow setting (docs/configuration.md lists them)'}.`,
  };
}

/** Nested mappings become dotted keys; arrays and scalars are leaves. */
function flattenFile(obj: Record<string, unknown>, prefix = ''): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      for (const [kk, vv] of flattenFile(v as Record<string, unknown>, key)) out.set(kk, vv);
    } else {
      out.set(key, v);
    }
  }
  return out;
}

function show(v: unknown): string {
  return typeof v === 'string' ? `"${v}"` : Array.isArray(v) ? JSON.stringify(v) : String(v);
}

/** A setting's default as its help and the docs show it; null when it has none. */
export function describeSettingDefault(spec: SettingSpec): string | null {
  if (spec.default === null) return null;
  if (spec.kind === 'bytes') return `${spec.default}`;
  return spec.default;
}

/**
 * docs/configuration.md's table of every setting (scripts/gen-settings-docs.mjs writes it between
 * its markers; a test fails when the page is stale).
 */
export function renderSettingsMarkdown(): string {
  const rows = SETTINGS.map((s) => {
    const flags = (['standalone', 'server', 'door'] as const)
      .map((c) => (s.flags[c] ? { c, f: s.flags[c].split(/\s/)[0] } : null))
      .filter((x) => x !== null);
    const byFlag = new Map<string, string[]>();
    for (const { c, f } of flags) byFlag.set(f!, [...(byFlag.get(f!) ?? []), c]);
    const flagText =
      byFlag.size === 0
        ? s.notInFile
          ? '—'
          : 'file or env only'
        : [...byFlag].map(([f, cs]) => `\`${f}\` (${cs.join(', ')})`).join('<br>');
    const def = s.reserved ? 'reserved' : s.default === null ? 'unset' : `\`${s.default}\``;
    const kind =
      s.kind === 'enum' ? (s.allowed ?? []).map((a) => `\`${a}\``).join(' \\| ') : s.kind;
    const help = (s.reserved ? `${s.help}. Not in this build yet: ${s.reserved}` : s.help).replace(
      /\|/g,
      '\\|',
    );
    return `| \`${s.key}\` | ${flagText} | \`${envNameOf(s)}\` | ${kind} | ${def} | ${help}${s.notInFile ? ' (not in the config file)' : ''} |`;
  });
  return [
    '| key | flag (commands) | env | values | default | meaning |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

/** A whole number written as a number or as digits; NaN otherwise. */
function wholeNumber(v: unknown): number {
  if (typeof v === 'number') return v;
  return typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
}
