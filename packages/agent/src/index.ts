export {
  Agent,
  AGENT_VERSION,
  EXIT,
  XCOM_ENV_MAX_BYTES,
  describeExit,
  type AgentDeps,
} from './agent.js';
export { readConfig, ConfigError, type AgentConfig } from './config.js';
export { stderrDiagnostics, silentDiagnostics, type Diagnostics } from './diag.js';
export {
  buildTaskEnv,
  stripAgentOnly,
  xcomEnvName,
  variableEnvName,
  connectionEnvName,
  TASK_VISIBLE_AGENT_VARS,
  type EnvMap,
  type TaskEnvInputs,
} from './env.js';
export { LineSplitter, MAX_LINE_BYTES, utf8Boundary } from './lines.js';
export { LogShipper, type BufferedLine, type StreamName } from './log-shipper.js';
export { backoffMs, isRetryable, retryUntil, codeName } from './retry.js';
export { bearerInterceptor, createAgentClient, type AgentClient } from './rpc.js';
export { exitCodeOf, livingGroupMembers, planLaunch, TaskProcess } from './task-process.js';
export { readTokenFromFd, TokenHolder, TokenReadError } from './token.js';
export {
  DEFAULT_UID_LOCK_DIR,
  ensureLockDir,
  procfs,
  removeLeftovers,
  SHARED_TMP_DIRS,
  sweepUid,
  UidAllocator,
  type ProcessTable,
  type UidLease,
} from './attempt-uid.js';
export { AttemptIsolation, type IsolationSettings } from './isolation.js';
