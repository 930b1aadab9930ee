import { describe, expect, it } from 'vitest';
import {
  AGENT_TOKEN_TRANSPORTS,
  CREDENTIAL_PLANE_KEYS,
  DEFAULT_CREDENTIAL_PLANE_CONFIG,
  SECRET_LIVENESS_MODES,
  SECRET_SCOPING_MODES,
  envNameForKey,
  loadCredentialPlaneConfig,
  resolveConfig,
  validateConfig,
  type ConfigProblem,
  type CredentialPlaneConfig,
} from '@leoflow/core';

const cfg = (over: Partial<CredentialPlaneConfig> = {}): CredentialPlaneConfig => ({
  ...DEFAULT_CREDENTIAL_PLANE_CONFIG,
  ...over,
});
const keysOf = (ps: readonly ConfigProblem[]) => ps.map((p) => p.key);

const ENUMS = [
  ['auth.agent_token_transport', 'agentTokenTransport', AGENT_TOKEN_TRANSPORTS],
  ['auth.secret_scoping', 'secretScoping', SECRET_SCOPING_MODES],
  ['auth.secret_liveness_mode', 'secretLivenessMode', SECRET_LIVENESS_MODES],
] as const;

describe('defaults', () => {
  it('are the documented ones and boot cleanly', () => {
    const r = resolveConfig({});
    expect(r.config).toEqual({
      agentTokenTransport: 'envvar',
      exchangeBootstrap: 'projected_token',
      secretScoping: 'enforce',
      secretLivenessMode: 'enforce',
      maxAttemptCredentialLifetimeSeconds: 86_400,
      warmPoolsEnabled: false,
      heartbeatIntervalSeconds: 15,
      agentLostThresholdSeconds: 90,
    });
    expect(r.problems).toEqual([]);
    expect(validateConfig(r.config)).toEqual([]);
    expect(new Set(Object.values(r.sources))).toEqual(new Set(['default']));
  });

  it('cannot be mutated through the exported object', () => {
    expect(Object.isFrozen(DEFAULT_CREDENTIAL_PLANE_CONFIG)).toBe(true);
    const r = resolveConfig({ flags: { 'auth.secret_scoping': 'permissive' } });
    expect(r.config.secretScoping).toBe('permissive');
    expect(DEFAULT_CREDENTIAL_PLANE_CONFIG.secretScoping).toBe('enforce');
  });
});

describe('env names', () => {
  it('are LEOFLOW_ + the key upper-cased with . → _', () => {
    expect(CREDENTIAL_PLANE_KEYS.map((k) => envNameForKey(k.key))).toEqual([
      'LEOFLOW_AUTH_AGENT_TOKEN_TRANSPORT',
      'LEOFLOW_AUTH_EXCHANGE_BOOTSTRAP',
      'LEOFLOW_AUTH_SECRET_SCOPING',
      'LEOFLOW_AUTH_SECRET_LIVENESS_MODE',
      'LEOFLOW_AUTH_MAX_ATTEMPT_CREDENTIAL_LIFETIME',
      'LEOFLOW_EXECUTION_WARM_POOLS_ENABLED',
      'LEOFLOW_EXECUTION_HEARTBEAT_INTERVAL',
      'LEOFLOW_EXECUTION_AGENT_LOST_THRESHOLD',
    ]);
  });

  it('bind both policy keys to enforce (T86)', () => {
    const { config } = loadCredentialPlaneConfig({
      env: {
        LEOFLOW_AUTH_SECRET_SCOPING: 'enforce',
        LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'enforce',
        LEOFLOW_UNRELATED: 'ignored',
      },
    });
    expect(config.secretScoping).toBe('enforce');
    expect(config.secretLivenessMode).toBe('enforce');
  });
});

describe('enum keys', () => {
  for (const [key, field, allowed] of ENUMS) {
    describe(key, () => {
      it.each([...allowed])('accepts %s from file, env and flags', (value) => {
        for (const layers of [
          { file: { [key]: value } },
          { env: { [envNameForKey(key)]: value } },
          { flags: { [key]: value } },
        ]) {
          const r = resolveConfig(layers);
          expect(r.problems).toEqual([]);
          expect(r.config[field]).toBe(value);
          // Warm pools are off, so no enum combination is refused on its own.
          expect(validateConfig(r.config, r.sources)).toEqual([]);
        }
      });

      it('refuses an unknown value naming key, value, source and the allowed values (T86)', () => {
        const r = resolveConfig({ env: { [envNameForKey(key)]: 'bogus' } });
        expect(r.problems).toEqual([]);
        const problems = validateConfig(r.config, r.sources);
        expect(keysOf(problems)).toEqual([key]);
        const msg = problems[0]?.message ?? '';
        expect(msg).toContain(key);
        expect(msg).toContain('"bogus"');
        expect(msg).toContain(envNameForKey(key));
        expect(msg).toContain(allowed.join(', '));
        expect(problems[0]).toMatchObject({ value: 'bogus', source: 'env' });
      });

      it('is case-sensitive but suggests the intended value', () => {
        const upper = allowed[1].toUpperCase();
        const problems = validateConfig(resolveConfig({ file: { [key]: upper } }).config);
        expect(keysOf(problems)).toEqual([key]);
        expect(problems[0]?.message).toContain(`did you mean ${allowed[1]}?`);
      });

      it('refuses an empty value rather than treating it as unset', () => {
        const r = resolveConfig({ env: { [envNameForKey(key)]: '' } });
        expect(keysOf(validateConfig(r.config, r.sources))).toEqual([key]);
      });

      it('refuses a non-string value', () => {
        const r = resolveConfig({ file: { [key]: 3 } });
        expect(keysOf(validateConfig(r.config))).toEqual([key]);
      });
    });
  }
});

it('the message documented in docs/configuration.md is the real one', () => {
  const r = resolveConfig({ env: { LEOFLOW_AUTH_SECRET_SCOPING: 'strict' } });
  expect(validateConfig(r.config, r.sources).map((p) => p.message)).toEqual([
    'auth.secret_scoping is "strict" (from env LEOFLOW_AUTH_SECRET_SCOPING); allowed values: enforce, permissive, off.',
  ]);
  const ceiling = validateConfig(cfg({ maxAttemptCredentialLifetimeSeconds: 300 }));
  expect(ceiling[0]?.message).toMatch(
    /^auth\.max_attempt_credential_lifetime \(300s\) must be greater than the per-attempt token TTL \(600s\), /,
  );
});

describe('precedence: defaults < file < env < flags', () => {
  const file = {
    auth: {
      agent_token_transport: 'exchange',
      secret_scoping: 'off',
      secret_liveness_mode: 'enforce',
      max_attempt_credential_lifetime: '12h',
    },
    execution: {
      warm_pools_enabled: false,
      heartbeat_interval: '10s',
      agent_lost_threshold: '60s',
    },
  };
  const env = {
    LEOFLOW_AUTH_SECRET_SCOPING: 'enforce',
    LEOFLOW_AUTH_MAX_ATTEMPT_CREDENTIAL_LIFETIME: '6h',
    LEOFLOW_EXECUTION_AGENT_LOST_THRESHOLD: '45s',
  };
  const flags = {
    'auth.max_attempt_credential_lifetime': '2h',
    'execution.agent_lost_threshold': undefined,
    'execution.heartbeat_interval': '5s',
  };

  it('takes each key from the highest layer that sets it', () => {
    const r = resolveConfig({ file, env, flags });
    expect(r.problems).toEqual([]);
    expect(r.config).toEqual({
      agentTokenTransport: 'exchange',
      exchangeBootstrap: 'projected_token',
      secretScoping: 'enforce',
      secretLivenessMode: 'enforce',
      maxAttemptCredentialLifetimeSeconds: 7_200,
      warmPoolsEnabled: false,
      heartbeatIntervalSeconds: 5,
      agentLostThresholdSeconds: 45,
    });
    expect(r.sources).toEqual({
      'auth.agent_token_transport': 'file',
      'auth.exchange_bootstrap': 'default',
      'auth.secret_scoping': 'env',
      'auth.secret_liveness_mode': 'file',
      'auth.max_attempt_credential_lifetime': 'flags',
      'execution.warm_pools_enabled': 'file',
      'execution.heartbeat_interval': 'flags',
      'execution.agent_lost_threshold': 'env',
    });
  });

  it.each(CREDENTIAL_PLANE_KEYS.map((k) => k.key))('holds for %s', (key) => {
    const spec = CREDENTIAL_PLANE_KEYS.find((k) => k.key === key);
    if (!spec) throw new Error(key);
    const values: [unknown, unknown, unknown] =
      spec.kind === 'enum'
        ? [spec.allowed[0], spec.allowed[1], spec.allowed[spec.allowed.length - 1]]
        : spec.kind === 'boolean'
          ? [true, 'false', true]
          : ['100s', '200s', '300s'];
    const envName = envNameForKey(key);
    const at = (layers: Parameters<typeof resolveConfig>[0]) =>
      resolveConfig(layers).config[spec.field];
    const f = { [key]: values[0] };
    const e = { [envName]: String(values[1]) };
    const fl = { [key]: values[2] };
    const norm = (v: unknown) =>
      spec.kind === 'duration'
        ? Number(String(v).replace('s', ''))
        : spec.kind === 'boolean'
          ? String(v) === 'true'
          : v;
    expect(at({ file: f })).toEqual(norm(values[0]));
    expect(at({ file: f, env: e })).toEqual(norm(values[1]));
    expect(at({ file: f, env: e, flags: fl })).toEqual(norm(values[2]));
    expect(at({ env: e, flags: { [key]: undefined } })).toEqual(norm(values[1]));
  });

  it('reads nested and dotted file keys alike', () => {
    const nested = resolveConfig({ file: { auth: { secret_scoping: 'enforce' } } });
    const dotted = resolveConfig({ file: { 'auth.secret_scoping': 'enforce' } });
    const mixed = resolveConfig({ file: { auth: { secret_liveness_mode: 'enforce' } } });
    expect(nested.config.secretScoping).toBe('enforce');
    expect(dotted.config.secretScoping).toBe('enforce');
    expect(mixed.config.secretLivenessMode).toBe('enforce');
  });
});

describe('unknown keys', () => {
  it('in the file name the key and suggest the closest one', () => {
    const r = resolveConfig({
      file: { auth: { secret_scopng: 'permissive' }, secret_liveness_mode: 'observe' },
    });
    expect(keysOf(r.problems)).toEqual(['auth.secret_scopng', 'secret_liveness_mode']);
    expect(r.problems[0]?.message).toContain('unknown configuration key auth.secret_scopng');
    expect(r.problems[0]?.message).toContain('did you mean auth.secret_scoping?');
    expect(r.problems[1]?.message).toContain('did you mean auth.secret_liveness_mode?');
    // An unknown key never changes the effective value.
    expect(r.config.secretScoping).toBe('enforce');
  });

  it('with nothing close say so without a guess', () => {
    const r = resolveConfig({ file: { totally: { unrelated: 1 } } });
    expect(r.problems[0]?.message).toContain('unknown configuration key totally.unrelated');
    expect(r.problems[0]?.message).not.toContain('did you mean');
  });

  it('owned by other parts of the server are neither read nor reported', () => {
    const r = resolveConfig(
      { file: { server: { http_addr: '0.0.0.0:8080' }, auth: { secret_scoping: 'enforce' } } },
      { otherKnownKeys: ['server.http_addr'] },
    );
    expect(r.problems).toEqual([]);
    expect(r.config.secretScoping).toBe('enforce');
  });

  it('among flags are reported too (a wiring mistake)', () => {
    expect(keysOf(resolveConfig({ flags: { 'auth.scoping': 'enforce' } }).problems)).toEqual([
      'auth.scoping',
    ]);
  });

  it('in env are ignored: the environment is shared with everything else', () => {
    expect(resolveConfig({ env: { LEOFLOW_AUTH_SECRET_SCOPNG: 'x' } }).problems).toEqual([]);
  });
});

describe('durations and booleans', () => {
  it('parse from every layer; a JSON/YAML number is seconds', () => {
    expect(
      resolveConfig({ file: { auth: { max_attempt_credential_lifetime: 7200 } } }).config
        .maxAttemptCredentialLifetimeSeconds,
    ).toBe(7200);
    expect(
      resolveConfig({ env: { LEOFLOW_EXECUTION_HEARTBEAT_INTERVAL: '500ms' } }).config
        .heartbeatIntervalSeconds,
    ).toBe(0.5);
  });

  it('a malformed duration is a problem naming key, value and source; the lower layer stays', () => {
    const r = resolveConfig({
      file: { execution: { heartbeat_interval: '20s' } },
      env: { LEOFLOW_EXECUTION_HEARTBEAT_INTERVAL: 'fifteen' },
    });
    expect(keysOf(r.problems)).toEqual(['execution.heartbeat_interval']);
    expect(r.problems[0]?.message).toContain('"fifteen"');
    expect(r.problems[0]?.message).toContain('LEOFLOW_EXECUTION_HEARTBEAT_INTERVAL');
    expect(r.config.heartbeatIntervalSeconds).toBe(20);
  });

  it.each([
    ['true', true],
    ['TRUE', true],
    ['1', true],
    ['false', false],
    ['0', false],
  ])('warm pools %j → %s', (text, value) => {
    const r = resolveConfig({ env: { LEOFLOW_EXECUTION_WARM_POOLS_ENABLED: text } });
    expect(r.problems).toEqual([]);
    expect(r.config.warmPoolsEnabled).toBe(value);
  });

  it.each(['yes', 'on', '', 'enabled'])('warm pools %j is refused naming the key', (text) => {
    const r = resolveConfig({ env: { LEOFLOW_EXECUTION_WARM_POOLS_ENABLED: text } });
    expect(keysOf(r.problems)).toEqual(['execution.warm_pools_enabled']);
    expect(r.config.warmPoolsEnabled).toBe(false);
  });
});

describe('the credential ceiling (T10)', () => {
  it.each(['0', '0s', '-1', '-1h'])('%s disables it and boots', (v) => {
    const r = resolveConfig({ env: { LEOFLOW_AUTH_MAX_ATTEMPT_CREDENTIAL_LIFETIME: v } });
    expect(r.problems).toEqual([]);
    expect(r.config.maxAttemptCredentialLifetimeSeconds).toBeLessThanOrEqual(0);
    expect(validateConfig(r.config)).toEqual([]);
  });

  it.each(['5m', '10m', '600'])('%s (≤ the 10 min token TTL) fails naming the key', (v) => {
    const r = resolveConfig({ env: { LEOFLOW_AUTH_MAX_ATTEMPT_CREDENTIAL_LIFETIME: v } });
    const problems = validateConfig(r.config, r.sources);
    expect(keysOf(problems)).toEqual(['auth.max_attempt_credential_lifetime']);
    expect(problems[0]?.message).toContain('auth.max_attempt_credential_lifetime');
  });

  it('just above the TTL boots', () => {
    expect(validateConfig(cfg({ maxAttemptCredentialLifetimeSeconds: 601 }))).toEqual([]);
  });

  it('is measured against the TTL the heartbeat implies (4 × interval when that dominates)', () => {
    // heartbeat 2h → TTL 8h; lost must sit between them; ceiling 6h is below the TTL.
    const problems = validateConfig(
      cfg({
        heartbeatIntervalSeconds: 7_200,
        agentLostThresholdSeconds: 10_800,
        maxAttemptCredentialLifetimeSeconds: 6 * 3600,
      }),
    );
    expect(keysOf(problems)).toEqual(['auth.max_attempt_credential_lifetime']);
  });
});

describe('the timing ladder: heartbeat < agent-lost < grace < token TTL < ceiling', () => {
  const ladder = (over: Partial<CredentialPlaneConfig>) => keysOf(validateConfig(cfg(over)));

  it.each([0, -5, Number.NaN])('heartbeat %s names execution.heartbeat_interval', (hb) => {
    expect(ladder({ heartbeatIntervalSeconds: hb })).toContain('execution.heartbeat_interval');
  });

  it.each([0, -1])('agent-lost %s names execution.agent_lost_threshold', (lost) => {
    expect(ladder({ agentLostThresholdSeconds: lost })).toEqual(['execution.agent_lost_threshold']);
  });

  it('agent-lost not above the heartbeat names execution.agent_lost_threshold', () => {
    expect(ladder({ heartbeatIntervalSeconds: 15, agentLostThresholdSeconds: 15 })).toEqual([
      'execution.agent_lost_threshold',
    ]);
    expect(ladder({ heartbeatIntervalSeconds: 120, agentLostThresholdSeconds: 60 })).toEqual([
      'execution.agent_lost_threshold',
    ]);
  });

  it('a settling grace (2 × agent-lost) reaching the token TTL names execution.agent_lost_threshold', () => {
    expect(ladder({ agentLostThresholdSeconds: 300 })).toEqual(['execution.agent_lost_threshold']);
    expect(ladder({ agentLostThresholdSeconds: 299 })).toEqual([]);
  });

  it('agent-lost reaching the token TTL names execution.agent_lost_threshold', () => {
    const problems = validateConfig(cfg({ agentLostThresholdSeconds: 600 }));
    expect(new Set(keysOf(problems))).toEqual(new Set(['execution.agent_lost_threshold']));
    expect(problems.some((p) => p.message.includes('token TTL'))).toBe(true);
  });

  it('a token TTL not below the ceiling names auth.max_attempt_credential_lifetime', () => {
    expect(ladder({ maxAttemptCredentialLifetimeSeconds: 600 })).toEqual([
      'auth.max_attempt_credential_lifetime',
    ]);
  });

  it('reports every broken rung at once', () => {
    expect(
      new Set(
        ladder({
          heartbeatIntervalSeconds: 0,
          agentLostThresholdSeconds: -1,
          maxAttemptCredentialLifetimeSeconds: 60,
        }),
      ),
    ).toEqual(
      new Set([
        'execution.heartbeat_interval',
        'execution.agent_lost_threshold',
        'auth.max_attempt_credential_lifetime',
      ]),
    );
  });

  it('availability side: the shipped defaults and sensible variations all boot', () => {
    for (const over of [
      {},
      { heartbeatIntervalSeconds: 5, agentLostThresholdSeconds: 30 },
      { heartbeatIntervalSeconds: 30, agentLostThresholdSeconds: 180 },
      {
        heartbeatIntervalSeconds: 3600,
        agentLostThresholdSeconds: 7_199,
        maxAttemptCredentialLifetimeSeconds: 0,
      },
      { maxAttemptCredentialLifetimeSeconds: 7 * 86_400 },
    ]) {
      expect(validateConfig(cfg(over))).toEqual([]);
    }
  });
});

describe('warm pools (T84)', () => {
  it('off: any transport/liveness combination boots', () => {
    for (const t of AGENT_TOKEN_TRANSPORTS) {
      for (const l of SECRET_LIVENESS_MODES) {
        expect(validateConfig(cfg({ agentTokenTransport: t, secretLivenessMode: l }))).toEqual([]);
      }
    }
  });

  it('on with envvar + observe fails naming both keys and their required values', () => {
    const problems = validateConfig(cfg({ warmPoolsEnabled: true, secretLivenessMode: 'observe' }));
    expect(keysOf(problems)).toEqual(['auth.agent_token_transport', 'auth.secret_liveness_mode']);
    for (const p of problems) {
      expect(p.message).toContain('auth.agent_token_transport=exchange');
      expect(p.message).toContain('auth.secret_liveness_mode=enforce');
    }
  });

  it('on with exchange but observe fails on liveness only', () => {
    expect(
      keysOf(
        validateConfig(
          cfg({
            warmPoolsEnabled: true,
            agentTokenTransport: 'exchange',
            secretLivenessMode: 'observe',
          }),
        ),
      ),
    ).toEqual(['auth.secret_liveness_mode']);
  });

  it('on with enforce but envvar fails on transport only', () => {
    expect(
      keysOf(validateConfig(cfg({ warmPoolsEnabled: true, secretLivenessMode: 'enforce' }))),
    ).toEqual(['auth.agent_token_transport']);
  });

  it('on with exchange + enforce boots, whatever the scoping mode', () => {
    for (const s of SECRET_SCOPING_MODES) {
      expect(
        validateConfig(
          cfg({
            warmPoolsEnabled: true,
            agentTokenTransport: 'exchange',
            secretLivenessMode: 'enforce',
            secretScoping: s,
          }),
        ),
      ).toEqual([]);
    }
  });

  it('from env strings, end to end', () => {
    expect(() =>
      loadCredentialPlaneConfig({ env: { LEOFLOW_EXECUTION_WARM_POOLS_ENABLED: 'true' } }),
    ).toThrow(/execution\.warm_pools_enabled=true requires/);
    const { config } = loadCredentialPlaneConfig({
      env: {
        LEOFLOW_EXECUTION_WARM_POOLS_ENABLED: 'true',
        LEOFLOW_AUTH_AGENT_TOKEN_TRANSPORT: 'exchange',
        LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'enforce',
      },
    });
    expect(config.warmPoolsEnabled).toBe(true);
  });

  // Core never reads the standby count (it is the CLI's subprocess setting), so the guard can only
  // tell the two apart by execution.warm_pools_enabled: the same environment, standby agents in
  // both, is refused with warm pools on and boots without them.
  it("Lite's standby agents are not warm pools: refused only when warm pools are on", () => {
    // observe named explicitly: the default is enforce (issue 34), and the refusal should name both
    const standby = {
      LEOFLOW_EXECUTION_STANDBY_AGENTS: '4',
      LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'observe',
    };
    expect(CREDENTIAL_PLANE_KEYS.map((k) => k.key)).not.toContain('execution.standby_agents');

    let thrown: unknown;
    try {
      loadCredentialPlaneConfig({
        env: { ...standby, LEOFLOW_EXECUTION_WARM_POOLS_ENABLED: 'true' },
      });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ code: 'LF_CONFIG_INVALID' });
    const { problems } = (thrown as { details: { problems: ConfigProblem[] } }).details;
    expect(keysOf(problems)).toEqual(['auth.agent_token_transport', 'auth.secret_liveness_mode']);
    for (const p of problems) {
      expect(p.message).toContain('auth.agent_token_transport=exchange');
      expect(p.message).toContain('auth.secret_liveness_mode=enforce');
    }

    const { config, sources } = loadCredentialPlaneConfig({ env: standby });
    expect(config).toMatchObject({
      warmPoolsEnabled: false,
      agentTokenTransport: 'envvar',
      secretLivenessMode: 'observe',
    });
    expect(sources['execution.warm_pools_enabled']).toBe('default');
  });
});

describe('loadCredentialPlaneConfig', () => {
  it('throws one LF_CONFIG_INVALID listing every problem', () => {
    let thrown: unknown;
    try {
      loadCredentialPlaneConfig({
        file: { auth: { secret_scopng: 'enforce' } },
        env: {
          LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'strict',
          LEOFLOW_AUTH_MAX_ATTEMPT_CREDENTIAL_LIFETIME: '5m',
        },
      });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ code: 'LF_CONFIG_INVALID' });
    const message = (thrown as Error).message;
    expect(message).toMatch(/^refusing to start: invalid configuration/);
    expect(message).toContain('auth.secret_scopng');
    expect(message).toContain('auth.secret_liveness_mode is "strict"');
    expect(message).toContain('auth.max_attempt_credential_lifetime');
    const details = (thrown as { details: { problems: { key: string }[] } }).details;
    expect(details.problems.map((p) => p.key)).toEqual([
      'auth.secret_scopng',
      'auth.secret_liveness_mode',
      'auth.max_attempt_credential_lifetime',
    ]);
  });

  it('returns the config and the sources when everything is valid', () => {
    const r = loadCredentialPlaneConfig({ flags: { 'auth.secret_scoping': 'off' } });
    expect(r.config.secretScoping).toBe('off');
    expect(r.sources['auth.secret_scoping']).toBe('flags');
  });
});

describe('validateConfig on a hand-built config', () => {
  it('catches values the type system cannot (JS callers, casts)', () => {
    const bad = {
      ...cfg(),
      secretScoping: 'strict',
      warmPoolsEnabled: 'yes',
      heartbeatIntervalSeconds: 'fast',
    } as unknown as CredentialPlaneConfig;
    expect(new Set(keysOf(validateConfig(bad)))).toEqual(
      new Set([
        'auth.secret_scoping',
        'execution.warm_pools_enabled',
        'execution.heartbeat_interval',
      ]),
    );
  });
});

describe('auth.exchange_bootstrap (the SecretKeyRef fallback is a setting under exchange)', () => {
  it('defaults to projected_token, which boots under either transport', () => {
    expect(loadCredentialPlaneConfig({}).config.exchangeBootstrap).toBe('projected_token');
    expect(validateConfig(cfg({ agentTokenTransport: 'exchange' }))).toEqual([]);
  });

  it('secret_key_ref boots under exchange', () => {
    const { config } = loadCredentialPlaneConfig({
      env: {
        LEOFLOW_AUTH_AGENT_TOKEN_TRANSPORT: 'exchange',
        LEOFLOW_AUTH_EXCHANGE_BOOTSTRAP: 'secret_key_ref',
      },
    });
    expect(config).toMatchObject({
      agentTokenTransport: 'exchange',
      exchangeBootstrap: 'secret_key_ref',
    });
  });

  it('secret_key_ref under envvar is refused, naming both keys', () => {
    const problems = validateConfig(cfg({ exchangeBootstrap: 'secret_key_ref' }));
    expect(keysOf(problems)).toEqual(['auth.exchange_bootstrap']);
    expect(problems[0]?.message).toMatch(
      /auth\.exchange_bootstrap=secret_key_ref requires auth\.agent_token_transport=exchange/,
    );
    expect(() =>
      loadCredentialPlaneConfig({ file: { auth: { exchange_bootstrap: 'secret_key_ref' } } }),
    ).toThrow(expect.objectContaining({ code: 'LF_CONFIG_INVALID' }));
  });

  it('is not a third transport value', () => {
    expect(keysOf(validateConfig(cfg({ agentTokenTransport: 'secret_key_ref' as never })))).toEqual(
      ['auth.agent_token_transport'],
    );
    expect(keysOf(validateConfig(cfg({ exchangeBootstrap: 'secretKeyRef' as never })))).toEqual([
      'auth.exchange_bootstrap',
    ]);
  });
});
