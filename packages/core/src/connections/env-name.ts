import { VaultError } from '../errors/leoflow-error.js';

export const CONN_ENV_PREFIX = 'AIRFLOW_CONN_';

/**
 * `AIRFLOW_CONN_<ID>` with the id upper-cased and nothing else changed. Airflow's environment
 * backend looks a connection up as exactly `AIRFLOW_CONN_` + `conn_id.upper()`, so rewriting a
 * `-`, `.` or `:` to `_` would make the task's own lookup miss. Such names cannot be `export`ed
 * from a shell but are valid in a process environment (execve / child_process), which is how
 * the agent sets them. Only `=` and NUL, which no environment can hold in a name, are refused.
 */
export function connectionEnvName(connId: string): string {
  return envName(CONN_ENV_PREFIX, connId, 'connection id');
}

/** Shared with `variableEnvName`. */
export function envName(prefix: string, name: string, what: string): string {
  if (typeof name !== 'string' || name === '') {
    throw new VaultError('LF_ENV_NAME_INVALID', `the ${what} is empty; it cannot name an env var`);
  }
  if (/[=\u0000]/.test(name)) {
    throw new VaultError(
      'LF_ENV_NAME_INVALID',
      `the ${what} contains "=" or a NUL character, which an environment variable name cannot hold; rename it`,
    );
  }
  // String#toUpperCase uses the locale-independent Unicode mapping, as Python's str.upper does.
  return prefix + name.toUpperCase();
}
