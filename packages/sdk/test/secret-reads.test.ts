import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { getConnection, getVariable } from '../src/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), 'sdk-reads-'));
  dirs.push(d);
  return d;
}

describe('D5: the SDK notes the names it read (never values) for the agent', () => {
  it('appends one line per successful read to LEOFLOW_SECRET_READS_FILE', () => {
    const file = join(scratch(), 'reads');
    const env = {
      LEOFLOW_SECRET_READS_FILE: file,
      AIRFLOW_CONN_WAREHOUSE: 'postgres://u:s3cret@h/db',
      AIRFLOW_VAR_API_KEY: 'k-123',
    };
    getConnection('warehouse', { env });
    getVariable('api_key', { env });
    expect(() => getVariable('absent', { env })).toThrow();
    expect(getVariable('absent2', { env, default: null })).toBeNull();
    const text = readFileSync(file, 'utf8');
    expect(text).toBe('connection warehouse\nvariable api_key\n');
    expect(text).not.toMatch(/s3cret|k-123/);
  });

  it('without the variable, or when the file cannot be written, the read still succeeds', () => {
    const d = scratch();
    expect(getVariable('v', { env: { AIRFLOW_VAR_V: 'x' } })).toBe('x');
    const env = { LEOFLOW_SECRET_READS_FILE: join(d, 'no', 'such', 'dir'), AIRFLOW_VAR_V: 'x' };
    expect(getVariable('v', { env })).toBe('x');
    expect(existsSync(join(d, 'no'))).toBe(false);
  });
});
