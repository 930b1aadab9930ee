import { describe, expect, it } from 'vitest';
import { checkConnectionStructure, type Connection } from '@leoflow/core';

const conn = (c: Partial<Connection>): Connection => ({
  conn_type: 'generic',
  host: null,
  login: null,
  password: null,
  schema: null,
  port: null,
  extra: null,
  ...c,
});
const failed = (c: Connection) =>
  checkConnectionStructure(c)
    .checks.filter((x) => !x.ok)
    .map((x) => x.name);

describe('checkConnectionStructure', () => {
  it.each(['postgres', 'mysql'])('%s: host set and port in range → ok', (conn_type) => {
    const r = checkConnectionStructure(
      conn({ conn_type, host: 'db', port: 5432, login: 'u', password: 'hunter2' }),
    );
    expect(r.ok).toBe(true);
    expect(r.checks.map((c) => c.name)).toEqual(['port', 'host', 'uri']);
    expect(JSON.stringify(r)).not.toContain('hunter2');
  });

  it.each(['postgres', 'mysql'])('%s: host required', (conn_type) => {
    const r = checkConnectionStructure(conn({ conn_type }));
    expect(r.ok).toBe(false);
    expect(r.checks.find((c) => c.name === 'host')!.message).toBe(
      `host is required for ${conn_type} connections`,
    );
  });

  it.each([0, 65536, 1.5, -1])('postgres: port %j out of range', (port) => {
    expect(failed(conn({ conn_type: 'postgres', host: 'db', port }))).toContain('port');
  });

  it('postgresql is checked as postgres', () => {
    expect(failed(conn({ conn_type: 'postgresql' }))).toEqual(['host']);
  });

  it('http: host required, whitespace does not count', () => {
    expect(failed(conn({ conn_type: 'http', host: '  ' }))).toEqual(['host']);
    expect(
      checkConnectionStructure(conn({ conn_type: 'http', host: 'https://api.example.com' })).ok,
    ).toBe(true);
  });

  it('generic: anything goes', () => {
    const r = checkConnectionStructure(conn({ conn_type: 'generic', extra: { anything: [1, 2] } }));
    expect(r.ok).toBe(true);
    expect(r.checks.map((c) => c.name)).toEqual(['generic', 'uri']);
  });

  it('a type without rules gets the common checks and says so', () => {
    const r = checkConnectionStructure(conn({ conn_type: 'aws', extra: { region_name: 'eu' } }));
    expect(r.ok).toBe(true);
    expect(r.checks.find((c) => c.name === 'conn_type')!.message).toMatch(/no structural rules/);
  });

  it('a connection that cannot be delivered as a URI fails the uri check', () => {
    expect(failed(conn({ conn_type: 'my type' }))).toEqual(['uri']);
    expect(failed(conn({ conn_type: 'generic', password: 'a\ud800' }))).toEqual(['uri']);
  });

  it('the uri check names fields the task will see normalised', () => {
    const r = checkConnectionStructure(conn({ conn_type: 'My-Type', host: '' }));
    const uri = r.checks.find((c) => c.name === 'uri')!;
    expect(uri.ok).toBe(true);
    expect(uri.message).toMatch(/conn_type normalised/);
    // As Airflow reads it back, the task sees the host lower-cased.
    expect(
      checkConnectionStructure(conn({ conn_type: 'http', host: 'API.Example.com' })).checks.find(
        (c) => c.name === 'uri',
      )!.message,
    ).toMatch(/the task sees host normalised/);
    expect(
      checkConnectionStructure(conn({ conn_type: 'generic', host: 'h' })).checks.find(
        (c) => c.name === 'uri',
      )!.message,
    ).toMatch(/unchanged/);
  });

  it('an empty conn_type fails', () => {
    expect(failed(conn({ conn_type: '' }))).toEqual(['conn_type']);
  });

  it('extra as stored text that is not JSON fails with "invalid Extra JSON" for any type', () => {
    const r = checkConnectionStructure({
      ...conn({ conn_type: 'http', host: 'h' }),
      extra: '{"password": hunter2',
    });
    expect(r.ok).toBe(false);
    expect(r.checks.find((c) => c.name === 'extra')!.message).toMatch(/^invalid Extra JSON/);
    expect(JSON.stringify(r)).not.toContain('hunter2');
  });
});
