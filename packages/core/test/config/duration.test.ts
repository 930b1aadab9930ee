import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '@leoflow/core';

describe('parseDuration', () => {
  it.each([
    ['24h', 86_400],
    ['30d', 30 * 86_400],
    ['90s', 90],
    ['15m', 900],
    ['500ms', 0.5],
    ['1500ms', 1.5],
    ['1h30m', 5_400],
    ['1.5h', 5_400],
    ['600', 600],
    [' 15s ', 15],
    ['0', 0],
    ['0s', 0],
    ['-1', -1],
    ['-5m', -300],
    ['+2h', 7_200],
    [3600, 3600],
    [0, 0],
    [-1, -1],
  ] as const)('%j → %s seconds', (input, seconds) => {
    expect(parseDuration(input, 'some.key')).toBe(seconds);
  });

  it.each(['', 'abc', '15x', '15 s', '15sec', '1w', 'h', '1h 30m', '--1h', '1e3', 'NaN', '15s10'])(
    'refuses %j naming the key',
    (input) => {
      const run = () => parseDuration(input, 'auth.max_attempt_credential_lifetime');
      expect(run).toThrow(/auth\.max_attempt_credential_lifetime must be a duration/);
      expect(run).toThrow(
        expect.objectContaining({
          code: 'LF_CONFIG_INVALID',
          details: expect.objectContaining({ key: 'auth.max_attempt_credential_lifetime' }),
        }),
      );
    },
  );

  it.each([Number.NaN, Number.POSITIVE_INFINITY, true, null, undefined, {}])(
    'refuses the non-duration %s',
    (input) => {
      expect(() => parseDuration(input, 'execution.heartbeat_interval')).toThrow(
        /execution\.heartbeat_interval/,
      );
    },
  );
});

describe('formatDuration', () => {
  it.each([
    [86_400, '24h'],
    [900, '15m'],
    [90, '90s'],
    [0.5, '500ms'],
    [0, '0s'],
    [-3600, '-1h'],
  ])('%s s → %s', (s, text) => {
    expect(formatDuration(s)).toBe(text);
    expect(parseDuration(text, 'k')).toBe(s);
  });
});
