import { describe, expect, it } from 'vitest';
import {
  DEFAULT_SENSITIVE_FIELDS,
  isNonSecretExtraField,
  isSensitiveKey,
  NON_SECRET_EXTRA_FIELDS,
  redactConnection,
  redactConnectionExtra,
} from '@leoflow/core';

describe('isSensitiveKey', () => {
  it("includes Airflow 2's DEFAULT_SENSITIVE_FIELDS", () => {
    for (const name of [
      'access_token',
      'api_key',
      'apikey',
      'authorization',
      'passphrase',
      'passwd',
      'password',
      'private_key',
      'secret',
      'token',
      'keyfile_dict',
      'service_account',
    ]) {
      expect(DEFAULT_SENSITIVE_FIELDS).toContain(name);
      expect(isSensitiveKey(name)).toBe(true);
    }
  });

  it('and the names newer Airflow added', () => {
    for (const name of [
      'access_key',
      'auth_header',
      'bearer',
      'connection_string',
      'dsn',
      'proxy',
      'service_key',
      'webhook_url',
    ]) {
      expect(isSensitiveKey(name)).toBe(true);
    }
  });

  it.each([
    'PASSWORD',
    'db_password',
    'MyApiKey',
    'client_secret',
    'extra__google_cloud_platform__keyfile_dict',
    'slack_webhook_url',
    '  Token  ',
    'api-key',
    'API Key',
    'private.key',
    'refresh_token',
  ])('%j is sensitive (case-insensitive substring after normalising separators)', (name) => {
    expect(isSensitiveKey(name)).toBe(true);
  });

  it.each(['host', 'project', 'key_path', 'scopes', 'region_name', 'num_retries', 'pass', ''])(
    '%j is not sensitive',
    (name) => {
      expect(isSensitiveKey(name)).toBe(false);
    },
  );

  it('extra names act like [core] sensitive_var_conn_names; empty entries are ignored', () => {
    expect(isSensitiveKey('my_pin', ['PIN'])).toBe(true);
    expect(isSensitiveKey('host', ['', ' '])).toBe(false);
  });
});

describe('redactConnectionExtra', () => {
  const extra = {
    project: 'p',
    keyfile_dict: { type: 'service_account', private_key: '-----BEGIN PRIVATE KEY-----x' },
    api_key: 12345,
    token: null,
    nested: { client_secret: 's3cr3t', region: 'eu', list: [{ password: 'x' }, 'plain'] },
    headers: [{ Authorization: 'Bearer abc' }],
  };

  it('is default-deny: only scalar values of the non-secret fields show, objects and lists are masked whole', () => {
    expect(redactConnectionExtra(extra)).toEqual({
      project: 'p',
      keyfile_dict: '***',
      api_key: '***',
      token: null,
      nested: '***',
      headers: '***',
    });
  });

  it('masks names no sensitive-name list foresaw', () => {
    const e = { pwd: 'a', jwt: 'b', credentials: 'c', auth: 'd', session_key: 'e', role_arn: 'f' };
    expect(Object.values(redactConnectionExtra(e))).toEqual(Array(6).fill('***'));
  });

  it('matches the non-secret list on the whole, normalized name', () => {
    expect(isNonSecretExtraField('Region-Name')).toBe(true);
    expect(isNonSecretExtraField(' SSLMODE ')).toBe(true);
    expect(isNonSecretExtraField('project_secret')).toBe(false);
    expect(isNonSecretExtraField('my_project')).toBe(false);
    for (const k of NON_SECRET_EXTRA_FIELDS) expect(isSensitiveKey(k)).toBe(false);
  });

  it('returns a deep copy and leaves the input alone', () => {
    const before = JSON.stringify(extra);
    const out = redactConnectionExtra(extra);
    expect(JSON.stringify(extra)).toBe(before);
    expect(out['nested']).not.toBe(extra.nested);
  });

  it('keeps "__proto__" an ordinary key', () => {
    const e = JSON.parse('{"__proto__":{"password":"x"}}') as Record<string, unknown>;
    const out = redactConnectionExtra(e);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(['__proto__']);
  });

  it('fails closed on a cyclic value', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic['self'] = cyclic;
    const out = redactConnectionExtra(cyclic);
    expect(JSON.stringify(out)).toContain('***');
  });

  it('never lets a secret through (reply canary)', () => {
    const SECRET = 'canary-Zx9-secret-value';
    const e = {
      password: SECRET,
      a: { b: { c: { private_key: SECRET } } },
      l: [[{ token: SECRET }]],
      extra__google_cloud_platform__keyfile_dict: SECRET,
    };
    expect(JSON.stringify(redactConnectionExtra(e))).not.toContain(SECRET);
  });
});

describe('redactConnection', () => {
  it('masks the password and the extra, leaves the rest', () => {
    expect(
      redactConnection({
        conn_type: 'postgres',
        host: 'h',
        login: 'u',
        password: 'hunter2',
        schema: 'db',
        port: 5432,
        extra: { sslmode: 'require', sslkey_passphrase: 'x' },
      }),
    ).toEqual({
      conn_type: 'postgres',
      host: 'h',
      login: 'u',
      password: '***',
      schema: 'db',
      port: 5432,
      extra: { sslmode: 'require', sslkey_passphrase: '***' },
    });
  });
});
