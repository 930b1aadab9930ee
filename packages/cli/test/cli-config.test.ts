import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliConfigPath, loadCliConfig, saveCliConfig } from '../src/cli-config.js';
import { ApiClient, CliError } from '../src/client.js';
import { resolveGlobals } from '../src/global-options.js';

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'leoflow-cli-config-'));
  file = join(dir, 'nested', 'leoflow', 'config.yaml');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function thrown(fn: () => unknown): CliError {
  try {
    fn();
  } catch (err) {
    if (err instanceof CliError) return err;
    throw err;
  }
  throw new Error('expected a CliError');
}

describe('the CLI config file', () => {
  it('lives at LEOFLOW_CLI_CONFIG, else under XDG_CONFIG_HOME, else ~/.config', () => {
    expect(cliConfigPath({ LEOFLOW_CLI_CONFIG: '/x/c.yaml', XDG_CONFIG_HOME: '/xdg' })).toBe(
      '/x/c.yaml',
    );
    expect(cliConfigPath({ XDG_CONFIG_HOME: '/xdg' })).toBe('/xdg/leoflow/config.yaml');
    expect(cliConfigPath({})).toMatch(/\/\.config\/leoflow\/config\.yaml$/);
  });

  it('is written 0600 in a 0700 folder and reads back the same', () => {
    expect(loadCliConfig(file)).toEqual({ profiles: {} });
    const cfg = {
      current_profile: 'prod',
      profiles: {
        prod: { url: 'https://prod.example.com', token: 't0k', output: 'json' as const },
        dev: { url: 'http://127.0.0.1:8080' },
      },
    };
    saveCliConfig(cfg, file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'nested', 'leoflow')).mode & 0o777).toBe(0o700);
    expect(loadCliConfig(file)).toEqual(cfg);
  });

  it.each([
    ['not YAML', 'profiles:\n  a: [1\n', /not valid YAML.*line/],
    ['a list', '- a\n', /must be a mapping/],
    ['a profile without url', 'profiles:\n  a:\n    token: x\n', /profiles\.a\.url/],
    ['a misspelt key', 'profiles:\n  a:\n    url: http://x\n    tokne: y\n', /"tokne"/],
    ['a bad output', 'profiles:\n  a:\n    url: http://x\n    output: xml\n', /output/],
    ['a dangling current', 'current_profile: b\nprofiles:\n  a:\n    url: http://x\n', /"b"/],
  ])('refuses %s with exit 1, naming the file and the fix', (_what, text, problem) => {
    mkdirSync(join(dir, 'nested', 'leoflow'), { recursive: true });
    writeFileSync(file, text);
    const err = thrown(() => loadCliConfig(file));
    expect(err.exitCode).toBe(1);
    expect(err.message).toContain(file);
    expect(err.message).toMatch(problem);
    expect(err.message).toContain('leoflow config set-profile');
  });
});

describe('resolving url, token and output', () => {
  beforeEach(() => {
    saveCliConfig(
      {
        current_profile: 'dev',
        profiles: {
          dev: { url: 'http://127.0.0.1:9999', token: 'dev-token' },
          prod: { url: 'https://prod.example.com', token: 'prod-token', output: 'yaml' },
        },
      },
      file,
    );
  });

  it('takes flag > environment > profile for url and token', () => {
    const env = { LEOFLOW_URL: 'http://env:1', LEOFLOW_TOKEN: 'env-token' };
    expect(resolveGlobals({ url: 'http://flag:1', token: 'flag-token' }, env, file)).toMatchObject({
      url: 'http://flag:1',
      urlSource: 'flag',
      token: 'flag-token',
      tokenSource: 'flag',
      profile: 'dev',
    });
    expect(resolveGlobals({}, env, file)).toMatchObject({
      url: 'http://env:1',
      urlSource: 'env',
      token: 'env-token',
      tokenSource: 'env',
    });
    expect(resolveGlobals({}, {}, file)).toMatchObject({
      url: 'http://127.0.0.1:9999',
      urlSource: 'profile',
      token: 'dev-token',
      tokenSource: 'profile',
    });
  });

  it('selects --profile over LEOFLOW_PROFILE over current_profile', () => {
    expect(resolveGlobals({ profile: 'prod' }, { LEOFLOW_PROFILE: 'dev' }, file)).toMatchObject({
      profile: 'prod',
      url: 'https://prod.example.com',
    });
    expect(resolveGlobals({}, { LEOFLOW_PROFILE: 'prod' }, file).profile).toBe('prod');
    expect(resolveGlobals({}, {}, file).profile).toBe('dev');
  });

  it('takes an explicit -o over the profile output, and the profile output over table', () => {
    expect(resolveGlobals({ profile: 'prod', output: 'json' }, {}, file).output).toBe('json');
    expect(resolveGlobals({ profile: 'prod' }, {}, file).output).toBe('yaml');
    expect(resolveGlobals({ profile: 'dev' }, {}, file).output).toBeUndefined();
  });

  it('names `leoflow config get-profiles` for an unknown profile (exit 1)', () => {
    const flag = thrown(() => resolveGlobals({ profile: 'nope' }, {}, file));
    expect(flag.exitCode).toBe(1);
    expect(flag.message).toMatch(/--profile names profile "nope".*leoflow config get-profiles/);
    const env = thrown(() => resolveGlobals({}, { LEOFLOW_PROFILE: 'nope' }, file));
    expect(env.message).toContain('LEOFLOW_PROFILE');
  });

  it('works with no config file at all', () => {
    expect(resolveGlobals({}, {}, join(dir, 'missing.yaml'))).toMatchObject({
      urlSource: 'default',
    });
  });
});

describe('the local admin token', () => {
  it('goes to loopback URLs, never to a profile URL on another machine', () => {
    const dataDir = join(dir, 'data');
    mkdirSync(dataDir);
    writeFileSync(join(dataDir, 'admin.token'), 'local-admin\n');
    const saved = { url: process.env.LEOFLOW_URL, token: process.env.LEOFLOW_TOKEN };
    delete process.env.LEOFLOW_URL;
    delete process.env.LEOFLOW_TOKEN;
    try {
      const local = new ApiClient({ dataDir, url: 'http://127.0.0.1:1', urlSource: 'profile' });
      expect(local.tokenSource).toBe('file');
      const remote = new ApiClient({
        dataDir,
        url: 'https://prod.example.com',
        urlSource: 'profile',
        profile: 'prod',
      });
      expect(remote.tokenSource).toBe('none');
      expect(new ApiClient({ dataDir }).tokenSource).toBe('file');
    } finally {
      if (saved.url !== undefined) process.env.LEOFLOW_URL = saved.url;
      if (saved.token !== undefined) process.env.LEOFLOW_TOKEN = saved.token;
    }
  });
});
