import { describe, expect, it } from 'vitest';
import { ManualClock } from '@leoflow/core';

describe('ManualClock', () => {
  it('moves only when told', () => {
    const c = new ManualClock(1000);
    expect(c.now()).toBe(1000);
    c.advance(500);
    expect(c.now()).toBe(1500);
  });
});
