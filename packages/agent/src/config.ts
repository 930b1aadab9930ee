import { parseNprocLimit, parseUidRange, type UidRange } from '@leoflow/core';
import { parseAgentUrls } from './endpoints.js';

/**
 * Everything the agent reads from its environment. The executor passes a minimal env; the token
 * is NOT here (it arrives on fd 3), and nothing read here is secret.
 */
export interface AgentConfig {
  /**
   * The control plane's agent URLs, comma-separated (LEOFLOW_AGENT_URL): every replica's, or
   * one address in front of them all. Calls move on to the next after a transport failure.
   */
  agentUrl: string;
  /**
   * A standby agent is started before it has an attempt: it boots and opens its connection,
   * then waits on fd 3 for an assignment (credential, task instance, workdir). It holds no
   * credential until then.
   */
  standby: boolean;
  taskInstanceId: string;
  workdir: string;
  heartbeatIntervalMs: number;
  /** True when LEOFLOW_HEARTBEAT_INTERVAL_MS was given; otherwise Register's answer may set it. */
  heartbeatIntervalFromEnv: boolean;
  runAs: { uid: number; gid: number } | undefined;
  /**
   * Per-attempt uids (LEOFLOW_ATTEMPT_UID_RANGE): when set and the agent is root, the task runs
   * under a uid of its own from this range instead of runAs.
   */
  attemptUids: { range: UidRange; nproc: number; lockDir: string | undefined } | undefined;
  python: string;
  node: string;
  /** node_modules that node tasks resolve packages from (e.g. @leoflow/sdk); linked into the workdir */
  nodeModules: string | undefined;
  /** the directory holding the Python task SDK (`leoflow/`): PYTHONPATH of python tasks */
  pythonSdk: string | undefined;
  reportDeadlineMs: number;
  bootstrapDeadlineMs: number;
  killGraceMs: number;
  rpcTimeoutMs: number;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function positiveInt(env: Env, name: string, dflt: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  if (!/^\d+$/.test(raw.trim()) || Number(raw) <= 0) {
    throw new ConfigError(
      `${name}=${JSON.stringify(raw)} is not a positive integer (milliseconds)`,
    );
  }
  return Number(raw);
}

function id(env: Env, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d+$/.test(raw.trim()))
    throw new ConfigError(`${name}=${JSON.stringify(raw)} is not a numeric id`);
  return Number(raw);
}

function required(env: Env, name: string): string {
  const v = env[name];
  if (v === undefined || v === '')
    throw new ConfigError(`${name} is required; the executor sets it`);
  return v;
}

export function readConfig(env: Env, execPath: string = process.execPath): AgentConfig {
  const agentUrls = parseAgentUrls(required(env, 'LEOFLOW_AGENT_URL'));
  if (agentUrls.length === 0) throw new ConfigError('LEOFLOW_AGENT_URL names no URL');
  for (const url of agentUrls) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ConfigError(`LEOFLOW_AGENT_URL: ${JSON.stringify(url)} is not a URL`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new ConfigError(
        `LEOFLOW_AGENT_URL must be http:// (h2c) or https:// URLs, got ${parsed.protocol}`,
      );
    }
  }
  const agentUrl = agentUrls.join(',');

  const uid = id(env, 'LEOFLOW_RUN_AS_UID');
  const gid = id(env, 'LEOFLOW_RUN_AS_GID');
  // Half a run-as pair would leave the task in root's group (or root's user): fail closed.
  if ((uid === undefined) !== (gid === undefined)) {
    throw new ConfigError('LEOFLOW_RUN_AS_UID and LEOFLOW_RUN_AS_GID must be set together');
  }

  let attemptUids: AgentConfig['attemptUids'];
  const rangeText = env['LEOFLOW_ATTEMPT_UID_RANGE'];
  if (rangeText !== undefined && rangeText !== '') {
    try {
      attemptUids = {
        range: parseUidRange(rangeText, 'LEOFLOW_ATTEMPT_UID_RANGE'),
        nproc: parseNprocLimit(
          env['LEOFLOW_ATTEMPT_NPROC_LIMIT'] ?? '0',
          'LEOFLOW_ATTEMPT_NPROC_LIMIT',
        ),
        lockDir: env['LEOFLOW_ATTEMPT_UID_LOCK_DIR'] || undefined,
      };
    } catch (err) {
      throw new ConfigError((err as Error).message);
    }
  }

  const hb = env['LEOFLOW_HEARTBEAT_INTERVAL_MS'];
  const standby = env['LEOFLOW_AGENT_STANDBY'] === '1';
  return {
    agentUrl,
    standby,
    taskInstanceId: standby
      ? (env['LEOFLOW_TASK_INSTANCE_ID'] ?? '')
      : required(env, 'LEOFLOW_TASK_INSTANCE_ID'),
    workdir: standby ? (env['LEOFLOW_WORKDIR'] ?? '') : required(env, 'LEOFLOW_WORKDIR'),
    heartbeatIntervalMs: positiveInt(env, 'LEOFLOW_HEARTBEAT_INTERVAL_MS', 15_000),
    heartbeatIntervalFromEnv: hb !== undefined && hb !== '',
    runAs: uid !== undefined && gid !== undefined ? { uid, gid } : undefined,
    attemptUids,
    python: env['LEOFLOW_PYTHON'] || 'python3',
    node: env['LEOFLOW_NODE'] || execPath,
    nodeModules: env['LEOFLOW_NODE_MODULES'] || undefined,
    pythonSdk: env['LEOFLOW_PYTHON_SDK'] || undefined,
    reportDeadlineMs: positiveInt(env, 'LEOFLOW_REPORT_DEADLINE_MS', 15 * 60_000),
    bootstrapDeadlineMs: positiveInt(env, 'LEOFLOW_BOOTSTRAP_DEADLINE_MS', 60_000),
    killGraceMs: positiveInt(env, 'LEOFLOW_KILL_GRACE_MS', 5_000),
    rpcTimeoutMs: positiveInt(env, 'LEOFLOW_RPC_TIMEOUT_MS', 10_000),
  };
}
