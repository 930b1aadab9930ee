import { describe, expect, it } from 'vitest';
import {
  AuthError,
  ConfigError,
  DagError,
  ERROR_CATALOGUE,
  httpStatusOf,
  isLeoflowError,
  isRegisteredErrorCode,
  LeoflowError,
  LivenessError,
  StoreError,
  VaultError,
} from '../../src/index.js';

describe('the error catalogue', () => {
  const entries = Object.entries(ERROR_CATALOGUE);

  it('gives every code one line on what to do next', () => {
    for (const [code, spec] of entries) {
      expect(code).toMatch(/^LF_[A-Z0-9_]+$/);
      expect(spec.fix, code).toMatch(/^\S.*[.)]$/);
      expect(spec.fix, code).not.toContain('\n');
    }
  });

  it('gives every code an HTTP status in the 4xx/5xx range or none', () => {
    for (const [code, spec] of entries) {
      if (spec.http !== null)
        // 507: the store's filesystem is full (LF_STORE_DISK_FULL), retryable once space returns
        expect([400, 401, 403, 404, 409, 413, 414, 429, 500, 502, 503, 507], code).toContain(
          spec.http,
        );
    }
  });

  it('keeps one code per problem: the removed synonyms stay removed', () => {
    for (const gone of [
      'LF_INVALID_CONFIG',
      'LF_INVALID_DAG',
      'LF_INVALID_SCHEDULE',
      'LF_INVALID_TIMEZONE',
      'LF_UNKNOWN_TASK',
      'LF_XCOM_NOT_FOUND',
    ])
      expect(isRegisteredErrorCode(gone), gone).toBe(false);
    expect(isRegisteredErrorCode('LF_CONFIG_INVALID')).toBe(true);
    expect(isRegisteredErrorCode('LF_DAG_INVALID')).toBe(true);
  });

  it('answers the REST status of a code from the table, 400 for one that has none', () => {
    expect(httpStatusOf('LF_DAG_NOT_FOUND')).toBe(404);
    expect(httpStatusOf('LF_UNAUTHENTICATED')).toBe(401);
    expect(httpStatusOf('LF_TASK_ACTIVE')).toBe(409);
    expect(httpStatusOf('LF_USAGE')).toBe(400);
    expect(isRegisteredErrorCode('toString')).toBe(false);
  });
});

describe('the named error classes', () => {
  const made = [
    [new ConfigError('LF_CONFIG_INVALID', 'm'), 'ConfigError', 'config'],
    [new DagError('LF_DAG_INVALID', 'm'), 'DagError', 'dag'],
    [new VaultError('LF_SECRET_KEY_MISSING', 'm'), 'VaultError', 'vault'],
    [new AuthError('LF_FORBIDDEN', 'm'), 'AuthError', 'auth'],
    [new LivenessError('LF_ATTEMPT_NOT_FOUND', 'm'), 'LivenessError', 'liveness'],
    [new StoreError('LF_STORE_MIGRATION_FAILED', 'm'), 'StoreError', 'store'],
  ] as const;

  it('are LeoflowErrors with their own name and a code of their family', () => {
    for (const [err, name, family] of made) {
      expect(err).toBeInstanceOf(LeoflowError);
      expect(isLeoflowError(err)).toBe(true);
      expect(err.name).toBe(name);
      expect(ERROR_CATALOGUE[err.code as keyof typeof ERROR_CATALOGUE].family).toBe(family);
      expect(err.details).toEqual({});
    }
  });

  it('refuse a code of another family at compile time', () => {
    // @ts-expect-error LF_FORBIDDEN is an auth code, not a config code
    expect(new ConfigError('LF_FORBIDDEN', 'm').code).toBe('LF_FORBIDDEN');
  });
});
