import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { STANDBY_SHRINK_AFTER_MS, StandbyPoolSize } from '../../src/executor/standby-pool-size.js';

describe('standby pool size', () => {
  function pool(floor: number, quietMs = 1_000) {
    let t = 0;
    const size = new StandbyPoolSize(floor, () => t, quietMs);
    return { size, advance: (ms: number) => (t += ms) };
  }

  it('holds the floor while attempts find an agent waiting', () => {
    const { size, advance } = pool(2);
    for (let i = 0; i < 10; i++) {
      size.attemptStarted(true);
      advance(5_000);
      expect(size.settle()).toBe(false);
    }
    expect(size.target).toBe(2);
  });

  it('grows by one per attempt that found the pool empty, never past twice the floor', () => {
    const { size } = pool(2);
    size.attemptStarted(false);
    expect(size.target).toBe(3);
    size.attemptStarted(false);
    size.attemptStarted(false);
    size.attemptStarted(false);
    expect([size.target, size.ceiling]).toEqual([4, 4]);
  });

  it('falls back one step per quiet period, to the floor and not below; a miss restarts the wait', () => {
    const { size, advance } = pool(2, 1_000);
    size.attemptStarted(false);
    size.attemptStarted(false);
    advance(999);
    expect(size.settle()).toBe(false);
    advance(1);
    expect(size.settle()).toBe(true);
    expect(size.target).toBe(3);
    // the next step needs a whole quiet period of its own
    advance(500);
    expect(size.settle()).toBe(false);
    size.attemptStarted(false);
    expect(size.target).toBe(4);
    advance(999);
    expect(size.settle()).toBe(false);
    advance(1);
    expect(size.settle()).toBe(true);
    advance(1_000);
    expect(size.settle()).toBe(true);
    advance(1_000);
    expect(size.settle()).toBe(false);
    expect(size.target).toBe(2);
  });

  it('docs/agent.md states the defaults the code has: a minute to shrink, twice the floor', () => {
    const doc = readFileSync(new URL('../../../../docs/agent.md', import.meta.url), 'utf8');
    expect(STANDBY_SHRINK_AFTER_MS).toBe(60_000);
    expect(doc).toMatch(/after a minute without such a miss\s+\(`STANDBY_SHRINK_AFTER_MS`\)/);
    expect(doc).toMatch(/up to twice the floor/);
    expect(new StandbyPoolSize(2).ceiling).toBe(4);
  });

  it('a floor of 0 (standby agents off) stays 0', () => {
    const { size, advance } = pool(0);
    size.attemptStarted(false);
    advance(10_000);
    size.settle();
    expect([size.target, size.ceiling]).toEqual([0, 0]);
  });
});
