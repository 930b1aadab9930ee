import { describe, expect, it } from 'vitest';
import { fromAirflowEnv, variableEnvName, VAR_ENV_PREFIX } from '@leoflow/core';

describe('variableEnvName', () => {
  it('AIRFLOW_VAR_ + the key upper-cased', () => {
    expect(VAR_ENV_PREFIX).toBe('AIRFLOW_VAR_');
    expect(variableEnvName('s3_bucket')).toBe('AIRFLOW_VAR_S3_BUCKET');
  });

  it('round-trips through fromAirflowEnv for lower-case keys', () => {
    const keys = ['a', 's3_bucket', 'feature.flag-x', 'ümlaut'];
    const env = Object.fromEntries(keys.map((k) => [variableEnvName(k), `value of ${k}`]));
    expect(fromAirflowEnv(env).variables).toEqual(
      [...keys]
        .sort((a, b) => (variableEnvName(a) < variableEnvName(b) ? -1 : 1))
        .map((k) => ({ key: k, value: `value of ${k}` })),
    );
  });
});
