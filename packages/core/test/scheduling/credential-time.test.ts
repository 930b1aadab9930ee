import { describe, expect, it } from 'vitest';
import {
  agentTokenTtlSeconds,
  settlingGraceSeconds,
  validateTimingLadder,
  type TimingLadderConfig,
} from '@leoflow/core';

describe('agentTokenTtlSeconds', () => {
  it('is 10 min for the default 15 s heartbeat and for a 1 s heartbeat (floor)', () => {
    expect(agentTokenTtlSeconds(15)).toBe(600);
    expect(agentTokenTtlSeconds(1)).toBe(600);
  });

  it('is 4 × the interval once that dominates', () => {
    expect(agentTokenTtlSeconds(3600)).toBe(4 * 3600);
    expect(agentTokenTtlSeconds(150)).toBe(600);
    expect(agentTokenTtlSeconds(151)).toBe(604);
  });

  it.each([1, 15, 30, 300, 3600])('is above the interval and at least 10 min for %ss', (hb) => {
    const ttl = agentTokenTtlSeconds(hb);
    expect(ttl).toBeGreaterThan(hb);
    expect(ttl).toBeGreaterThanOrEqual(600);
  });

  it.each([0, -15, Number.NaN, Number.POSITIVE_INFINITY])(
    'refuses heartbeat %s naming the key',
    (hb) => {
      expect(() => agentTokenTtlSeconds(hb)).toThrow(
        expect.objectContaining({
          code: 'LF_CONFIG_INVALID',
          details: { key: 'execution.heartbeat_interval' },
        }),
      );
    },
  );
});

describe('settlingGraceSeconds', () => {
  it('is two agent-lost thresholds', () => {
    expect(settlingGraceSeconds(90)).toBe(180);
  });
});

const DEFAULTS: TimingLadderConfig = {
  heartbeatIntervalSeconds: 15,
  agentLostThresholdSeconds: 90,
  tokenTtlSeconds: agentTokenTtlSeconds(15),
  maxAttemptCredentialLifetimeSeconds: 24 * 3600,
};

function keys(cfg: Partial<TimingLadderConfig>): string[] {
  return validateTimingLadder({ ...DEFAULTS, ...cfg }).map((v) => v.key);
}

describe('validateTimingLadder', () => {
  it('accepts the defaults, with and without the settling grace rung', () => {
    expect(validateTimingLadder(DEFAULTS)).toEqual([]);
    expect(
      validateTimingLadder({ ...DEFAULTS, settlingGraceSeconds: settlingGraceSeconds(90) }),
    ).toEqual([]);
  });

  it('refuses a ceiling not above the token TTL, naming auth.max_attempt_credential_lifetime', () => {
    const v = validateTimingLadder({ ...DEFAULTS, maxAttemptCredentialLifetimeSeconds: 300 });
    expect(v).toHaveLength(1);
    expect(v[0]!.key).toBe('auth.max_attempt_credential_lifetime');
    expect(v[0]!.message).toContain('auth.max_attempt_credential_lifetime');
    expect(v[0]!.message).toMatch(/above 600s/);
    expect(v[0]!.message).toMatch(/0 to disable/);
    expect(keys({ maxAttemptCredentialLifetimeSeconds: 600 })).toEqual([
      'auth.max_attempt_credential_lifetime',
    ]);
    expect(keys({ maxAttemptCredentialLifetimeSeconds: 601 })).toEqual([]);
  });

  it('treats a zero or negative ceiling as disabled', () => {
    expect(keys({ maxAttemptCredentialLifetimeSeconds: 0 })).toEqual([]);
    expect(keys({ maxAttemptCredentialLifetimeSeconds: -1 })).toEqual([]);
  });

  it('refuses an agent-lost threshold not above the heartbeat', () => {
    const v = validateTimingLadder({ ...DEFAULTS, agentLostThresholdSeconds: 15 });
    expect(v.map((x) => x.key)).toEqual(['execution.agent_lost_threshold']);
    expect(v[0]!.message).toContain('execution.heartbeat_interval');
    expect(v[0]!.message).toContain('90s');
  });

  it('refuses an agent-lost threshold not below the token TTL', () => {
    const v = validateTimingLadder({ ...DEFAULTS, agentLostThresholdSeconds: 600 });
    expect(v.map((x) => x.key)).toEqual(['execution.agent_lost_threshold']);
    expect(v[0]!.message).toMatch(/below 600s/);
  });

  it('checks the settling grace against the token TTL when given', () => {
    const cfg = { agentLostThresholdSeconds: 300, settlingGraceSeconds: settlingGraceSeconds(300) };
    expect(keys(cfg)).toEqual(['execution.agent_lost_threshold']);
    expect(validateTimingLadder({ ...DEFAULTS, ...cfg })[0]!.message).toMatch(/below 300s/);
    expect(keys({ agentLostThresholdSeconds: 299, settlingGraceSeconds: 598 })).toEqual([]);
  });

  it('refuses non-positive heartbeat and threshold', () => {
    expect(keys({ heartbeatIntervalSeconds: 0 })).toContain('execution.heartbeat_interval');
    expect(keys({ agentLostThresholdSeconds: -5 })).toContain('execution.agent_lost_threshold');
  });

  it('reports every broken rung at once', () => {
    expect(
      keys({
        heartbeatIntervalSeconds: 700,
        agentLostThresholdSeconds: 650,
        tokenTtlSeconds: 600,
        maxAttemptCredentialLifetimeSeconds: 60,
      }),
    ).toEqual([
      'execution.agent_lost_threshold',
      'execution.agent_lost_threshold',
      'auth.max_attempt_credential_lifetime',
    ]);
  });

  it('follows a long heartbeat: the TTL grows with it, so a large threshold stays valid', () => {
    const hb = 3600;
    expect(
      validateTimingLadder({
        heartbeatIntervalSeconds: hb,
        agentLostThresholdSeconds: 6 * hb - 1,
        tokenTtlSeconds: agentTokenTtlSeconds(hb),
        maxAttemptCredentialLifetimeSeconds: 24 * 3600,
      }).map((v) => v.key),
    ).toEqual(['execution.agent_lost_threshold']); // 6 × 1h is above the 4h TTL
    expect(
      validateTimingLadder({
        heartbeatIntervalSeconds: hb,
        agentLostThresholdSeconds: 3 * hb,
        tokenTtlSeconds: agentTokenTtlSeconds(hb),
        maxAttemptCredentialLifetimeSeconds: 24 * 3600,
      }),
    ).toEqual([]);
  });
});
