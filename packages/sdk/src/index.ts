export {
  getConnection,
  getVariable,
  type Env,
  type EnvOption,
  type GetConnectionOptions,
  type GetVariableOptions,
  type TaskConnection,
} from './env.js';
export {
  taskContext,
  pullXcom,
  pushXcom,
  xcomEnvName,
  type TaskContext,
  type PullXcomOptions,
  type PushXcomOptions,
} from './context.js';
export {
  googleAuth,
  resolveGoogleConnection,
  secretVersionName,
  DEFAULT_GOOGLE_SCOPES,
  DEFAULT_SECRET_MANAGER_ENDPOINT,
  SECRET_MANAGER_ENDPOINT_ENV,
  GOOGLE_TOKEN_URL,
  type GoogleAuthOptionsLeoflow,
  type ResolvedGoogleConnection,
} from './google.js';
