import { describe, expect, it } from 'vitest';
import {
  envNameOf,
  flagProperty,
  parseSetting,
  resolveSettings,
  SETTINGS,
  settingsOf,
  type SettingSpec,
} from '../../src/config/index.js';

/** A valid value of each kind, as an operator would write it in the config file. */
function sample(spec: SettingSpec): unknown {
  switch (spec.kind) {
    case 'port':
      return 4321;
    case 'duration':
      return (
        {
          'execution.heartbeat_interval': '10s',
          'auth.max_attempt_credential_lifetime': '48h',
          'scheduler.lease_ttl': '30s',
          'execution.agent_lost_threshold': '100s',
        }[spec.key] ?? '2s'
      );
    case 'boolean':
      return true;
    case 'enum':
      return spec.allowed![spec.allowed!.length - 1];
    // (the credential plane's booleans: warm pools on needs its partners, below)
    case 'integer':
    case 'bytes':
      return Math.min(spec.max ?? Math.max(1000, spec.min ?? 0), Math.max(spec.min ?? 0, 7));
    case 'url':
      return spec.key === 'database.url' ? 'postgres://u@db:5432/x' : 'https://door.example.com';
    case 'list':
      return spec.pattern
        ? ['https://a.example.com:8793', 'https://b.example.com:8793']
        : ['/srv/a'];
    case 'string':
    case 'path':
      return spec.key === 'execution.attempt_uid_range' ? '200000-200999' : `/some/${spec.key}`;
  }
}

describe('the settings table', () => {
  it('names each key, environment variable and flag once', () => {
    const keys = SETTINGS.map((s) => s.key);
    expect(new Set(keys).size).toBe(keys.length);
    const envs = SETTINGS.map(envNameOf);
    expect(new Set(envs).size).toBe(envs.length);
    for (const command of ['standalone', 'server', 'door'] as const) {
      const props = settingsOf(command).map((s) => flagProperty(s.flags[command]!));
      expect(new Set(props).size).toBe(props.length);
    }
  });

  it('spells every default as its own kind parses it', () => {
    for (const spec of SETTINGS) {
      if (spec.default === null || spec.credentialPlane) continue;
      expect(parseSetting(spec, spec.default, 'default').problem, spec.key).toBeUndefined();
    }
  });

  it('resolves defaults with no layer at all, with no problem', () => {
    const r = resolveSettings({});
    expect(r.problems).toEqual([]);
    expect(r.values['http.port']).toBe(8080);
    expect(r.values['auth.secret_scoping']).toBe(r.credentials.secretScoping);
    expect(Object.values(r.sources).every((s) => s === 'default')).toBe(true);
  });

  it('accepts every setting in the config file, except where the file itself is found', () => {
    for (const spec of SETTINGS) {
      if (spec.notInFile || spec.reserved) continue;
      // the settings that only make sense in pairs come with their partner
      const partner: Record<string, Record<string, unknown>> = {
        'agent.tls.cert': { 'agent.tls.key': '/k.pem' },
        'agent.tls.key': { 'agent.tls.cert': '/c.pem' },
        'database.schema': { 'database.url': 'postgres://u@db/x' },
        'auth.exchange_bootstrap': { 'auth.agent_token_transport': 'exchange' },
        'execution.warm_pools_enabled': {
          'auth.agent_token_transport': 'exchange',
          'auth.secret_liveness_mode': 'enforce',
        },
      };
      const r = resolveSettings({ file: { [spec.key]: sample(spec), ...partner[spec.key] } });
      expect(r.problems, spec.key).toEqual([]);
      expect(r.sources[spec.key], spec.key).toBe('file');
    }
  });

  it('takes agent.advertise_url as a list of URLs: comma-separated from env and flags, a list from the file, each item held to the URL pattern', () => {
    const urls = ['http://127.0.0.1:8793', 'http://127.0.0.1:8794'];
    const fromEnv = resolveSettings({
      env: { LEOFLOW_AGENT_ADVERTISE_URL: ' http://127.0.0.1:8793 ,http://127.0.0.1:8794,' },
    });
    expect(fromEnv.problems).toEqual([]);
    expect(fromEnv.values['agent.advertise_url']).toEqual(urls);
    const fromFile = resolveSettings({ file: { agent: { advertise_url: urls } } });
    expect(fromFile.values['agent.advertise_url']).toEqual(urls);
    // one load-balanced name, as before
    expect(
      resolveSettings({ flags: { 'agent.advertise_url': 'https://agents.example.com' } }).values[
        'agent.advertise_url'
      ],
    ).toEqual(['https://agents.example.com']);
    expect(
      resolveSettings({ flags: { 'agent.advertise_url': ' , ' } }).values['agent.advertise_url'],
    ).toBe(null);
    const bad = resolveSettings({
      flags: { 'agent.advertise_url': 'http://127.0.0.1:8793,127.0.0.1:8794' },
    });
    expect(bad.problems.map((p) => p.message)).toEqual([
      expect.stringMatching(
        /^agent\.advertise_url is "http:\/\/127\.0\.0\.1:8793,127\.0\.0\.1:8794" \(from --agent-advertise-url\); set each item to an http\(s\):\/\/ URL agents can dial \("127\.0\.0\.1:8794" is not\)\.$/,
      ),
    ]);
  });

  it('nests file keys as YAML does', () => {
    const r = resolveSettings({ file: { agent: { tls: { cert: '/c.pem', key: '/k.pem' } } } });
    expect(r.problems).toEqual([]);
    expect(r.values['agent.tls.cert']).toBe('/c.pem');
  });

  it('applies defaults < file < env < flags, and records each source', () => {
    const file = { http: { port: 1 }, agent: { port: 2 }, metrics: { port: 3 } };
    const env = { LEOFLOW_AGENT_PORT: '20', LEOFLOW_METRICS_PORT: '30' };
    const flags = { 'metrics.port': '300' };
    const r = resolveSettings({ file, env, flags });
    expect(r.problems).toEqual([]);
    expect([r.values['http.port'], r.values['agent.port'], r.values['metrics.port']]).toEqual([
      1, 20, 300,
    ]);
    expect([r.sources['http.port'], r.sources['agent.port'], r.sources['metrics.port']]).toEqual([
      'file',
      'env',
      'flags',
    ]);
    expect(r.sources['agent.host']).toBe('default');
  });

  it('refuses an unknown key and where-the-file-is in the file, naming each', () => {
    const r = resolveSettings({
      file: { htpp: { port: 1 }, data_dir: '/x', dags: { paused_at_creation: false } },
    });
    const byKey = Object.fromEntries(r.problems.map((p) => [p.key, p.message]));
    expect(byKey['htpp.port']).toContain('did you mean http.port');
    expect(byKey['data_dir']).toContain('cannot be set in the config file');
    expect(byKey['dags.paused_at_creation']).toBeUndefined();
  });

  it('starts new DAGs paused unless told otherwise (issue 40), from the file, env or a flag', () => {
    expect(resolveSettings({}).values['dags.paused_at_creation']).toBe(true);
    const fromFile = resolveSettings({ file: { dags: { paused_at_creation: false } } });
    expect(fromFile.values['dags.paused_at_creation']).toBe(false);
    const fromEnv = resolveSettings({ env: { LEOFLOW_DAGS_PAUSED_AT_CREATION: 'false' } });
    expect(fromEnv.values['dags.paused_at_creation']).toBe(false);
    const fromFlag = resolveSettings({ flags: { 'dags.paused_at_creation': 'false' } });
    expect(fromFlag.values['dags.paused_at_creation']).toBe(false);
    const bad = resolveSettings({ flags: { 'dags.paused_at_creation': 'sometimes' } });
    expect(bad.problems.map((p) => p.message).join()).toContain('set it to true or false');
  });

  it('leaves the executor section to its owner', () => {
    const r = resolveSettings({ file: { executor: { default: 'kubernetes', kubernetes: {} } } });
    expect(r.problems).toEqual([]);
  });

  it('names the key, value and source of a bad value', () => {
    const r = resolveSettings({ env: { LEOFLOW_HTTP_PORT: '70000' } });
    expect(r.problems.map((p) => p.message)).toEqual([
      'http.port is "70000" (from env LEOFLOW_HTTP_PORT); set it to a port number 0-65535 (0 picks a free one).',
    ]);
  });

  it('checks across settings: a TLS pair, a schema without PostgreSQL, the lease ladder', () => {
    const r = resolveSettings({
      flags: {
        'agent.tls.cert': '/c.pem',
        'database.schema': 'cell1',
        'scheduler.lease_ttl': '5s',
        'scheduler.lease_renew_interval': '4s',
      },
    });
    const keys = r.problems.map((p) => p.key).sort();
    expect(keys).toEqual(['agent.tls.cert', 'database.schema', 'scheduler.lease_renew_interval']);
  });

  it('keeps the credential plane its own validation (the timing ladder)', () => {
    const r = resolveSettings({ flags: { 'execution.heartbeat_interval': '120s' } });
    expect(r.problems.map((p) => p.key)).toEqual(['execution.agent_lost_threshold']);
  });

  it('turns a setting off with its off word', () => {
    const r = resolveSettings({
      flags: { 'metrics.port': 'off', 'execution.run_as_user': 'none' },
    });
    expect(r.problems).toEqual([]);
    expect(r.values['metrics.port']).toBeNull();
    expect(r.values['execution.run_as_user']).toBeNull();
  });
});
