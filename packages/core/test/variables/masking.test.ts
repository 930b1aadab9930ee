import { describe, expect, it } from 'vitest';
import { maskVariableValue } from '@leoflow/core';

describe('maskVariableValue', () => {
  it.each([
    ['db_password', '***'],
    ['SLACK_TOKEN', '***'],
    ['my-api-key', '***'],
    ['gcp_service_account_json', '***'],
    ['s3_bucket', 'the value'],
    ['environment', 'the value'],
  ])('%s → %s', (key, shown) => {
    expect(maskVariableValue(key, 'the value')).toBe(shown);
  });

  it('honours extra sensitive names', () => {
    expect(maskVariableValue('license_code', 'x', ['license'])).toBe('***');
  });

  it('masks an empty value too (it is still the secret)', () => {
    expect(maskVariableValue('password', '')).toBe('***');
  });
});
