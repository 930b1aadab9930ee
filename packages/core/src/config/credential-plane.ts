import { LeoflowError, ConfigError } from '../errors/leoflow-error.js';
import type { SecretLivenessMode, SecretScopingMode } from '../credentials/scoping-policy.js';
import {
  agentTokenTtlSeconds,
  AGENT_TOKEN_TTL_FLOOR_SECONDS,
  settlingGraceSeconds,
  validateTimingLadder,
} from '../scheduling/credential-time.js';
import { formatDuration, parseDuration } from './duration.js';

export const AGENT_TOKEN_TRANSPORTS = ['envvar', 'exchange'] as const;
export type AgentTokenTransport = (typeof AGENT_TOKEN_TRANSPORTS)[number];
/**
 * Where an exchange-mode pod's bootstrap credential comes from: a projected service-account
 * token (the default), or — for clusters that cannot project one — a per-attempt Secret the pod
 * references with secretKeyRef. A setting under exchange, not a third transport.
 */
export const EXCHANGE_BOOTSTRAPS = ['projected_token', 'secret_key_ref'] as const;
export type ExchangeBootstrap = (typeof EXCHANGE_BOOTSTRAPS)[number];
/**
 * The default first (DESIGN §5). `permissive` and `off` are migration modes for bringing in DAGs
 * whose declarations may be incomplete; `observe` is seed 001's rollout mode. Doctor names each
 * as an exposure.
 */
export const SECRET_SCOPING_MODES = [
  'enforce',
  'permissive',
  'off',
] as const satisfies readonly SecretScopingMode[];
export const SECRET_LIVENESS_MODES = [
  'enforce',
  'observe',
] as const satisfies readonly SecretLivenessMode[];

// Compile-time: each list names every mode the credential module understands, so a mode added
// there cannot be silently refused at boot.
type Missing<U, L extends readonly string[]> = [Exclude<U, L[number]>] extends [never]
  ? true
  : never;
const _allScoping: Missing<SecretScopingMode, typeof SECRET_SCOPING_MODES> = true;
const _allLiveness: Missing<SecretLivenessMode, typeof SECRET_LIVENESS_MODES> = true;

/**
 * The operator-scoped settings of the credential plane (DESIGN §5) plus the two timings its
 * ladder is measured against. Never settable by a DAG author.
 */
export interface CredentialPlaneConfig {
  /** auth.agent_token_transport — Kubernetes executor only */
  agentTokenTransport: AgentTokenTransport;
  /** auth.exchange_bootstrap — meaningful only under agentTokenTransport=exchange */
  exchangeBootstrap: ExchangeBootstrap;
  /** auth.secret_scoping */
  secretScoping: SecretScopingMode;
  /** auth.secret_liveness_mode */
  secretLivenessMode: SecretLivenessMode;
  /** auth.max_attempt_credential_lifetime, seconds; ≤ 0 disables the renewal ceiling */
  maxAttemptCredentialLifetimeSeconds: number;
  /** execution.warm_pools_enabled */
  warmPoolsEnabled: boolean;
  /** execution.heartbeat_interval, seconds */
  heartbeatIntervalSeconds: number;
  /** execution.agent_lost_threshold, seconds */
  agentLostThresholdSeconds: number;
}

/**
 * Lite and Pro start with both halves of the promise on: a task receives exactly what it declared
 * (`secret_scoping=enforce`) and its credential dies with it (`secret_liveness_mode=enforce`).
 * This departs on purpose from seed 001 D9's "permissive initial default": there is no installed
 * base to migrate, and the SDKs' error names the missing declaration (docs/credentials.md).
 */
export const DEFAULT_CREDENTIAL_PLANE_CONFIG: Readonly<CredentialPlaneConfig> = Object.freeze({
  agentTokenTransport: 'envvar',
  exchangeBootstrap: 'projected_token',
  secretScoping: 'enforce',
  secretLivenessMode: 'enforce',
  maxAttemptCredentialLifetimeSeconds: 24 * 3600,
  warmPoolsEnabled: false,
  heartbeatIntervalSeconds: 15,
  agentLostThresholdSeconds: 90,
});

type Field = keyof CredentialPlaneConfig;

interface KeySpecBase {
  key: string;
  field: Field;
  description: string;
}
interface EnumKeySpec extends KeySpecBase {
  kind: 'enum';
  allowed: readonly string[];
}
interface DurationKeySpec extends KeySpecBase {
  kind: 'duration';
}
interface BooleanKeySpec extends KeySpecBase {
  kind: 'boolean';
}
export type ConfigKeySpec = EnumKeySpec | DurationKeySpec | BooleanKeySpec;

/** Every key this module owns, in documentation order. */
export const CREDENTIAL_PLANE_KEYS: readonly ConfigKeySpec[] = Object.freeze([
  {
    key: 'auth.agent_token_transport',
    field: 'agentTokenTransport',
    kind: 'enum',
    allowed: AGENT_TOKEN_TRANSPORTS,
    description: "how a Kubernetes pod's agent obtains its bearer token",
  },
  {
    key: 'auth.exchange_bootstrap',
    field: 'exchangeBootstrap',
    kind: 'enum',
    allowed: EXCHANGE_BOOTSTRAPS,
    description: 'what an exchange pod presents: a projected token, or a per-attempt Secret',
  },
  {
    key: 'auth.secret_scoping',
    field: 'secretScoping',
    kind: 'enum',
    allowed: SECRET_SCOPING_MODES,
    description: 'deliver only the secrets a task declared',
  },
  {
    key: 'auth.secret_liveness_mode',
    field: 'secretLivenessMode',
    kind: 'enum',
    allowed: SECRET_LIVENESS_MODES,
    description: 'refuse secrets to an attempt that is no longer live',
  },
  {
    key: 'auth.max_attempt_credential_lifetime',
    field: 'maxAttemptCredentialLifetimeSeconds',
    kind: 'duration',
    description: 'renewal ceiling measured from first issue; ≤ 0 disables',
  },
  {
    key: 'execution.warm_pools_enabled',
    field: 'warmPoolsEnabled',
    kind: 'boolean',
    description: 'warm worker pools; requires exchange transport and enforced liveness',
  },
  {
    key: 'execution.heartbeat_interval',
    field: 'heartbeatIntervalSeconds',
    kind: 'duration',
    description: 'how often an agent heartbeats (and renews its token)',
  },
  {
    key: 'execution.agent_lost_threshold',
    field: 'agentLostThresholdSeconds',
    kind: 'duration',
    description: 'an attempt silent this long is failed by the reaper',
  },
] satisfies ConfigKeySpec[]);

/** `auth.secret_scoping` → `LEOFLOW_AUTH_SECRET_SCOPING`. */
export function envNameForKey(key: string): string {
  return `LEOFLOW_${key.toUpperCase().replace(/[.-]/g, '_')}`;
}

export type ConfigSource = 'default' | 'file' | 'env' | 'flags';

export interface ConfigProblem {
  /** the dotted config key to change */
  key: string;
  message: string;
  /** the offending value as given, when there is one */
  value?: unknown;
  /** the layer the offending value came from */
  source?: ConfigSource;
}

export interface ConfigLayers {
  /** parsed config file: nested ({auth: {secret_scoping: …}}) or dotted keys, or a mix */
  file?: Record<string, unknown>;
  /** usually process.env; only the LEOFLOW_ names of known keys are read */
  env?: Record<string, string | undefined>;
  /** CLI flags keyed by dotted config key; undefined means "not given" */
  flags?: Record<string, unknown>;
}

export interface ResolveOptions {
  /**
   * Keys owned by other parts of the server that may appear in the same file; they are neither
   * read nor reported as unknown.
   */
  otherKnownKeys?: readonly string[];
}

export interface ResolvedConfig {
  config: CredentialPlaneConfig;
  /** where each key's effective value came from (for `leoflow doctor` and boot messages) */
  sources: Record<string, ConfigSource>;
  /** parse problems (malformed durations/booleans, unknown keys); enum checks are validateConfig's */
  problems: ConfigProblem[];
}

/**
 * Applies defaults < file < env < flags. Pure: the caller reads the file and passes process.env.
 *
 * Enum values are carried through unchecked (so validateConfig reports them once, with the allowed
 * values); a malformed duration or boolean cannot be carried in a typed field, so it is reported
 * here and the lower layer's value stays in effect — boot must refuse whenever problems is
 * non-empty, so that fallback is never run.
 */
export function resolveConfig(layers: ConfigLayers, opts: ResolveOptions = {}): ResolvedConfig {
  const config: CredentialPlaneConfig = { ...DEFAULT_CREDENTIAL_PLANE_CONFIG };
  const sources: Record<string, ConfigSource> = {};
  const problems: ConfigProblem[] = [];
  const specs = new Map(CREDENTIAL_PLANE_KEYS.map((s) => [s.key, s]));
  for (const s of CREDENTIAL_PLANE_KEYS) sources[s.key] = 'default';
  const known = [...specs.keys(), ...(opts.otherKnownKeys ?? [])];
  const other = new Set(opts.otherKnownKeys ?? []);

  const applyFlat = (flat: Map<string, unknown>, source: ConfigSource) => {
    for (const [key, raw] of flat) {
      if (raw === undefined) continue;
      const spec = specs.get(key);
      if (!spec) {
        if (!other.has(key)) problems.push(unknownKey(key, source, known));
        continue;
      }
      const parsed = parseValue(spec, raw, source);
      if ('problem' in parsed) {
        problems.push(parsed.problem);
        continue;
      }
      (config as unknown as Record<Field, unknown>)[spec.field] = parsed.value;
      sources[key] = source;
    }
  };

  if (layers.file) applyFlat(flatten(layers.file), 'file');
  if (layers.env) {
    const fromEnv = new Map<string, unknown>();
    for (const s of CREDENTIAL_PLANE_KEYS) {
      const v = layers.env[envNameForKey(s.key)];
      if (v !== undefined) fromEnv.set(s.key, v);
    }
    applyFlat(fromEnv, 'env');
  }
  if (layers.flags) applyFlat(flatten(layers.flags), 'flags');
  return { config, sources, problems };
}

/**
 * Everything about an effective configuration that must stop boot: unknown enum values, the
 * timing ladder (heartbeat < agent-lost < settling grace < per-attempt token TTL < ceiling) and
 * the warm-pool prerequisites. Every problem names the key to change; empty = bootable.
 */
export function validateConfig(
  cfg: CredentialPlaneConfig,
  sources: Record<string, ConfigSource> = {},
): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const at = (key: string) => (sources[key] ? { source: sources[key] } : {});

  for (const spec of CREDENTIAL_PLANE_KEYS) {
    const value: unknown = cfg[spec.field];
    if (spec.kind === 'enum' && !(typeof value === 'string' && spec.allowed.includes(value))) {
      out.push({
        key: spec.key,
        value,
        ...at(spec.key),
        message:
          `${spec.key} is ${show(value)}${fromWhere(spec.key, sources)}; allowed values: ` +
          `${spec.allowed.join(', ')}${didYouMean(String(value), spec.allowed, true)}.`,
      });
    } else if (spec.kind === 'boolean' && typeof value !== 'boolean') {
      out.push({
        key: spec.key,
        value,
        ...at(spec.key),
        message: `${spec.key} is ${show(value)}${fromWhere(spec.key, sources)}; set it to true or false.`,
      });
    } else if (spec.kind === 'duration' && (typeof value !== 'number' || Number.isNaN(value))) {
      out.push({
        key: spec.key,
        value,
        ...at(spec.key),
        message: `${spec.key} is ${show(value)}${fromWhere(spec.key, sources)}; set it to a duration such as 90s.`,
      });
    }
  }

  const typeProblems = new Set(out.map((p) => p.key));
  const hb = cfg.heartbeatIntervalSeconds;
  const lost = cfg.agentLostThresholdSeconds;
  // With an unusable heartbeat the TTL is unknowable; the floor keeps the other rungs checkable
  // while the heartbeat problem itself is reported by the ladder.
  const ttl =
    typeof hb === 'number' && Number.isFinite(hb) && hb > 0
      ? agentTokenTtlSeconds(hb)
      : AGENT_TOKEN_TTL_FLOOR_SECONDS;
  for (const v of validateTimingLadder({
    heartbeatIntervalSeconds: hb,
    agentLostThresholdSeconds: lost,
    tokenTtlSeconds: ttl,
    maxAttemptCredentialLifetimeSeconds: cfg.maxAttemptCredentialLifetimeSeconds,
    settlingGraceSeconds: settlingGraceSeconds(lost),
  })) {
    // A key already reported as the wrong type needs no second, ladder-worded complaint.
    if (!typeProblems.has(v.key)) out.push({ key: v.key, message: v.message, ...at(v.key) });
  }

  if (cfg.exchangeBootstrap === 'secret_key_ref' && cfg.agentTokenTransport !== 'exchange') {
    // The per-attempt Secret is a bootstrap credential for the exchange; under envvar it would
    // sit beside a literal token and protect nothing, so the combination is refused.
    out.push({
      key: 'auth.exchange_bootstrap',
      value: cfg.exchangeBootstrap,
      ...at('auth.exchange_bootstrap'),
      message: `auth.exchange_bootstrap=secret_key_ref requires auth.agent_token_transport=exchange; auth.agent_token_transport is ${show(cfg.agentTokenTransport)}. Set it to exchange, or set auth.exchange_bootstrap to projected_token.`,
    });
  }

  out.push(...warmPoolPrerequisiteProblems(cfg, sources));
  return out;
}

/**
 * Warm pools' prerequisites (part of validateConfig): a worker serves many attempts, so only
 * per-attempt tokens that die with their attempt and no bearer on the pod keep that from widening
 * the exfiltration window to the pool's lifetime. The control plane checks these again at its own
 * start, so an embedder that skips validateConfig is refused as well.
 */
export function warmPoolPrerequisiteProblems(
  cfg: Pick<
    CredentialPlaneConfig,
    'warmPoolsEnabled' | 'agentTokenTransport' | 'secretLivenessMode'
  >,
  sources: Record<string, ConfigSource> = {},
): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const at = (key: string) => (sources[key] ? { source: sources[key] } : {});
  if (cfg.warmPoolsEnabled === true) {
    const need =
      'execution.warm_pools_enabled=true requires auth.agent_token_transport=exchange and ' +
      'auth.secret_liveness_mode=enforce';
    if (cfg.agentTokenTransport !== 'exchange') {
      out.push({
        key: 'auth.agent_token_transport',
        value: cfg.agentTokenTransport,
        ...at('auth.agent_token_transport'),
        message: `${need}; auth.agent_token_transport is ${show(cfg.agentTokenTransport)}. Set it to exchange, or disable warm pools.`,
      });
    }
    if (cfg.secretLivenessMode !== 'enforce') {
      out.push({
        key: 'auth.secret_liveness_mode',
        value: cfg.secretLivenessMode,
        ...at('auth.secret_liveness_mode'),
        message: `${need}; auth.secret_liveness_mode is ${show(cfg.secretLivenessMode)}. Set it to enforce, or disable warm pools.`,
      });
    }
  }
  return out;
}

/**
 * resolveConfig + validateConfig for boot: returns the effective configuration or throws one
 * LF_CONFIG_INVALID error listing every problem (so an operator fixes them in one pass).
 */
export function loadCredentialPlaneConfig(
  layers: ConfigLayers,
  opts: ResolveOptions = {},
): { config: CredentialPlaneConfig; sources: Record<string, ConfigSource> } {
  const { config, sources, problems } = resolveConfig(layers, opts);
  const all = [...problems, ...validateConfig(config, sources)];
  if (all.length > 0) throw configError(all);
  return { config, sources };
}

export function configError(problems: readonly ConfigProblem[]): LeoflowError {
  const lines = problems.map((p) => `  - ${p.message}`);
  return new ConfigError(
    'LF_CONFIG_INVALID',
    `refusing to start: invalid configuration\n${lines.join('\n')}`,
    { problems: problems.map((p) => ({ key: p.key, message: p.message })) },
  );
}

function parseValue(
  spec: ConfigKeySpec,
  raw: unknown,
  source: ConfigSource,
): { value: unknown } | { problem: ConfigProblem } {
  const where = ` (from ${sourceLabel(spec.key, source)})`;
  switch (spec.kind) {
    case 'enum':
      // Carried as given; validateConfig names the allowed values.
      return { value: typeof raw === 'string' ? raw.trim() : raw };
    case 'boolean': {
      if (typeof raw === 'boolean') return { value: raw };
      const s = typeof raw === 'string' ? raw.trim().toLowerCase() : raw;
      if (s === 'true' || s === '1' || s === 1) return { value: true };
      if (s === 'false' || s === '0' || s === 0) return { value: false };
      return {
        problem: {
          key: spec.key,
          value: raw,
          source,
          message: `${spec.key} is ${show(raw)}${where}; set it to true or false.`,
        },
      };
    }
    case 'duration':
      try {
        return { value: parseDuration(raw, spec.key) };
      } catch {
        return {
          problem: {
            key: spec.key,
            value: raw,
            source,
            message:
              `${spec.key} is ${show(raw)}${where}; set it to a duration such as 90s, 15m, 24h, ` +
              '500ms, or a number of seconds.',
          },
        };
      }
  }
}

function unknownKey(key: string, source: ConfigSource, known: readonly string[]): ConfigProblem {
  const hint = didYouMean(key, known, false);
  return {
    key,
    source,
    message: `unknown configuration key ${key} in the ${source === 'file' ? 'config file' : source}${hint || '; it is not a Leoflow setting'}.`,
  };
}

/** Nested objects become dotted keys; arrays and scalars are leaves. */
function flatten(obj: Record<string, unknown>, prefix = ''): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      for (const [kk, vv] of flatten(v as Record<string, unknown>, key)) out.set(kk, vv);
    } else {
      out.set(key, v);
    }
  }
  return out;
}

function sourceLabel(key: string, source: ConfigSource): string {
  switch (source) {
    case 'env':
      return `env ${envNameForKey(key)}`;
    case 'file':
      return 'the config file';
    case 'flags':
      return 'a command-line flag';
    case 'default':
      return 'the default';
  }
}

function fromWhere(key: string, sources: Record<string, ConfigSource>): string {
  const s = sources[key];
  return s && s !== 'default' ? ` (from ${sourceLabel(key, s)})` : '';
}

function show(v: unknown): string {
  return typeof v === 'string' ? `"${v}"` : String(v);
}

/**
 * A suggestion when one candidate is close: a case-only difference, the same last segment under
 * another section (`secret_scoping` → `auth.secret_scoping`), or a small edit distance.
 */
function didYouMean(input: string, candidates: readonly string[], isValue: boolean): string {
  const lower = input.toLowerCase();
  const last = lower.split('.').pop() ?? lower;
  let best: { c: string; d: number } | undefined;
  for (const c of candidates) {
    const cl = c.toLowerCase();
    let d = editDistance(lower, cl);
    if (cl === lower || cl.split('.').pop() === last) d = 0;
    if (!best || d < best.d) best = { c, d };
  }
  if (!best) return '';
  const limit = Math.max(2, Math.floor(input.length / 4));
  if (best.d > limit) return '';
  return isValue ? ` (did you mean ${best.c}?)` : `; did you mean ${best.c}?`;
}

function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0] ?? 0;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j] ?? 0;
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      prev[j] = Math.min(up + 1, (prev[j - 1] ?? 0) + 1, diag + cost);
      diag = up;
    }
  }
  return prev[b.length] ?? 0;
}

/** For docs and `leoflow doctor`: the default of a key, spelled as an operator would write it. */
export function describeDefault(spec: ConfigKeySpec): string {
  const v = DEFAULT_CREDENTIAL_PLANE_CONFIG[spec.field];
  return spec.kind === 'duration' && typeof v === 'number' ? formatDuration(v) : String(v);
}
