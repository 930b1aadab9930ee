import { describe, expect, it } from 'vitest';
import {
  DEFAULT_ATTEMPT_UID_RANGE,
  isLeoflowError,
  parseNprocLimit,
  parseUidRange,
  uidRangeCollisionMessage,
  uidRangeCollisions,
} from '@leoflow/core';

describe('execution.attempt_uid_range', () => {
  it('parses first-last and refuses anything else, naming the key', () => {
    expect(parseUidRange(DEFAULT_ATTEMPT_UID_RANGE)).toEqual({
      first: 1879048192,
      last: 1879113727,
    });
    for (const bad of ['', '1000', '999-2000', '3000-2000', 'a-b', '1000-4294967295']) {
      let err: unknown;
      try {
        parseUidRange(bad);
      } catch (e) {
        err = e;
      }
      expect(isLeoflowError(err) && err.code, bad).toBe('LF_CONFIG_ATTEMPT_UID_RANGE');
      expect((err as Error).message).toContain('execution.attempt_uid_range');
    }
  });

  it('finds accounts, groups and subordinate id ranges inside the range', () => {
    const range = { first: 100_000, last: 100_099 };
    const hits = uidRangeCollisions(range, {
      passwd: 'root:x:0:0::/root:/bin/sh\nalice:x:100050:100050::/home/alice:/bin/sh\n',
      group: 'staff:x:50:\nbuild:x:100099:\n',
      subuid: 'bob:99000:2000\n',
      subgid: 'carol:200000:65536\n',
    });
    expect(hits).toEqual([
      { file: '/etc/passwd', name: 'alice', id: 100050 },
      { file: '/etc/group', name: 'build', id: 100099 },
      { file: '/etc/subuid', name: 'bob', id: 100000 },
    ]);
    const msg = uidRangeCollisionMessage(range, hits);
    expect(msg).toContain('execution.attempt_uid_range=100000-100099 overlaps alice (100050)');
    expect(msg).toContain('--attempt-uid-range');
    expect(uidRangeCollisions(range, { passwd: null, group: null })).toEqual([]);
  });

  it('execution.attempt_nproc_limit is a whole number', () => {
    expect(parseNprocLimit('0')).toBe(0);
    expect(parseNprocLimit('4096')).toBe(4096);
    expect(() => parseNprocLimit('-1')).toThrow(/execution.attempt_nproc_limit/);
  });
});
