import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, scratchDir, startStandalone, type Standalone } from '../support/processes.js';

// `leoflow config …` profiles against a real standalone. Every call gets its own temporary
// LEOFLOW_CLI_CONFIG (never the real home) and no LEOFLOW_URL / LEOFLOW_TOKEN, so whatever
// reaches the server came from the profile.

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let env: Record<string, string>;
let configFile: string;

beforeAll(async () => {
  scratch = scratchDir('leoflow-cli-profiles-');
  sa = await startStandalone({ dataDir: join(scratch.dir, 'data') });
  configFile = join(scratch.dir, 'home', 'leoflow', 'config.yaml');
  env = {
    LEOFLOW_CLI_CONFIG: configFile,
    LEOFLOW_URL: '',
    LEOFLOW_TOKEN: '',
    LEOFLOW_PROFILE: '',
    // No ./.leoflow/admin.token fallback from the repository folder either.
    LEOFLOW_DATA_DIR: join(scratch.dir, 'no-data-dir'),
  };
});
afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

describe('CLI profiles (real standalone)', () => {
  it("uses a profile's url and token, and never prints the token", async () => {
    const tokenFile = join(scratch.dir, 'token');
    writeFileSync(tokenFile, `${sa.token}\n`, { mode: 0o600 });
    const set = await cli(
      ['config', 'set-profile', 'lite', '--url', sa.url, '--token-file', tokenFile],
      env,
    );
    expect(set.code, set.stderr).toBe(0);
    expect(statSync(configFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(scratch.dir, 'home', 'leoflow')).mode & 0o777).toBe(0o700);
    expect(readFileSync(configFile, 'utf8')).toContain(sa.token);

    // Only --profile: no URL, no token anywhere else.
    const list = await cli(['dags', 'list', '--profile', 'lite', '-o', 'json'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject({ dags: [] });
    const none = await cli(['dags', 'list'], { ...env, LEOFLOW_URL: sa.url });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/API token/);

    const table = await cli(['config', 'get-profiles'], env);
    const json = await cli(['config', 'get-profiles', '-o', 'json'], env);
    for (const r of [table, json]) {
      expect(r.code).toBe(0);
      expect(r.stdout).not.toContain(sa.token);
    }
    expect(table.stdout).toMatch(/^lite\s+\S*\s*http:\/\/\S+\s+set\s+-$/m);
    expect(JSON.parse(json.stdout)).toMatchObject({
      profiles: [{ name: 'lite', url: sa.url, token: 'set' }],
    });

    // use-profile makes it the default; its output applies unless -o is given.
    expect((await cli(['config', 'use-profile', 'lite'], env)).code).toBe(0);
    expect((await cli(['config', 'set-profile', 'lite', '-o', 'json'], env)).code).toBe(0);
    const [asJson, asTable, envWins] = await Promise.all([
      cli(['dags', 'list'], env),
      cli(['dags', 'list', '-o', 'table'], env),
      cli(['dags', 'list'], { ...env, LEOFLOW_URL: 'http://127.0.0.1:9' }),
    ]);
    expect(asJson.code, asJson.stderr).toBe(0);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ dags: [] });
    expect(asTable.stdout).toBe('(none)\n');
    expect(envWins.code).toBe(1);
    expect(envWins.stderr).toContain('cannot reach http://127.0.0.1:9');
  });

  it('exits 1 saying what to do for a wrong token, an unknown profile or a broken file', async () => {
    const set = await cli(
      ['config', 'set-profile', 'stale', '--url', sa.url, '--token', 'not-a-valid-token'],
      env,
    );
    expect(set.code, set.stderr).toBe(0);
    const [wrong, unknown, use] = await Promise.all([
      cli(['runs', 'list', '--profile', 'stale'], env),
      cli(['runs', 'list', '--profile', 'nope'], env),
      cli(['config', 'use-profile', 'nope'], env),
    ]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(`refused the token of profile "stale" in ${configFile}`);
    expect(wrong.stderr).toContain('leoflow config set-profile stale --token-file <file>');
    expect(wrong.stderr).not.toContain('not-a-valid-token');
    for (const r of [unknown, use]) {
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('leoflow config get-profiles');
    }

    writeFileSync(configFile, 'profiles:\n  lite: [oops\n');
    const broken = await cli(['dags', 'list'], env);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain(configFile);
    expect(broken.stderr).toContain('not valid YAML');
    expect(broken.stderr).not.toMatch(/^\s+at /m);
  });
});
