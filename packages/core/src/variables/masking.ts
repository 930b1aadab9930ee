import { isSensitiveKey, MASK } from '../connections/masking.js';

/**
 * The value an API reply or log line may show for a variable: `***` when the key looks like a
 * secret by Airflow's rules (`isSensitiveKey`), the value otherwise.
 */
export function maskVariableValue(
  key: string,
  value: string,
  extraSensitiveNames: readonly string[] = [],
): string {
  return isSensitiveKey(key, extraSensitiveNames) ? MASK : value;
}
