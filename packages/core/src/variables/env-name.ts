import { envName } from '../connections/env-name.js';

export const VAR_ENV_PREFIX = 'AIRFLOW_VAR_';

/**
 * `AIRFLOW_VAR_<KEY>` with the key upper-cased and nothing else changed, because Airflow's
 * environment backend looks a variable up as exactly `AIRFLOW_VAR_` + `key.upper()`. A key with
 * `-` or `.` gives a name a shell cannot `export` but a process environment can hold; only `=`
 * and NUL are refused (`LF_ENV_NAME_INVALID`).
 */
export function variableEnvName(key: string): string {
  return envName(VAR_ENV_PREFIX, key, 'variable key');
}
