import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  LeaseElector,
  type ElectorTimers,
} from '../../../src/scheduler/leadership/lease-elector.js';
import type { LeaseGrant, LeaseStore } from '../../../src/scheduler/leadership/lease-store.js';

/** One manual clock for the elector's monotonic time and its timers. */
class ManualTime implements ElectorTimers {
  now = 0;
  private seq = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.pending.set(id, { at: this.now + ms, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }

  /** Moves time forward, firing due timers in order and letting their promises settle. */
  async advance(ms: number): Promise<void> {
    const target = this.now + ms;
    for (;;) {
      await settle();
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.pending) {
        if (entry[1].at <= target && (next === undefined || entry[1].at < next[1].at)) next = entry;
      }
      if (next === undefined) break;
      this.pending.delete(next[0]);
      this.now = Math.max(this.now, next[1].at);
      next[1].fn();
    }
    this.now = target;
    await settle();
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(v: T): void;
  reject(e: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A lease store whose every answer the test gives by hand. */
class ScriptedLeases implements Omit<LeaseStore, 'current'> {
  readonly calls: {
    op: 'acquire' | 'renew' | 'release';
    epoch?: number;
    answer: Deferred<LeaseGrant | undefined>;
  }[] = [];
  acquire(): Promise<LeaseGrant | undefined> {
    return this.push('acquire');
  }
  renew(_n: string, _h: string, epoch: number): Promise<LeaseGrant | undefined> {
    return this.push('renew', epoch);
  }
  async release(_n: string, _h: string, epoch: number): Promise<void> {
    const d = deferred<LeaseGrant | undefined>();
    this.calls.push({ op: 'release', epoch, answer: d });
    d.resolve(undefined);
    await d.promise;
  }
  last() {
    const call = this.calls.at(-1);
    if (call === undefined) throw new Error('no lease call yet');
    return call;
  }
  private push(op: 'acquire' | 'renew', epoch?: number): Promise<LeaseGrant | undefined> {
    const d = deferred<LeaseGrant | undefined>();
    this.calls.push({ op, ...(epoch !== undefined ? { epoch } : {}), answer: d });
    return d.promise;
  }
}

const TTL = 1_000;
const RENEW = 300;
const MARGIN = 200;
const grant = (epoch: number): LeaseGrant => ({ epoch, expiresAtDbMs: 0 });

function elector() {
  const time = new ManualTime();
  const leases = new ScriptedLeases();
  const e = new LeaseElector({
    leases,
    holder: 'me',
    ttlMs: TTL,
    renewIntervalMs: RENEW,
    safetyMarginMs: MARGIN,
    logger: pino({ level: 'silent' }),
    monotonicNow: () => time.now,
    timers: time,
  });
  return { time, leases, e };
}

describe('LeaseElector deadline (manual clock)', () => {
  it('counts its deadline from when the request was sent, not from when it was answered', async () => {
    const { time, leases, e } = elector();
    e.start();
    await time.advance(0);
    expect(leases.last().op).toBe('acquire');
    // The database answers late: 300 ms after the request left.
    await time.advance(300);
    leases.last().answer.resolve(grant(7));
    await time.advance(0);
    expect(e.fence()).toEqual({ kind: 'lease', name: 'scheduler', epoch: 7 });
    // From here every renewal fails (a partition).
    let leadingAt = time.now;
    while (time.now < 2_000) {
      const pending = leases.last();
      if (pending.op === 'renew') pending.answer.reject(new Error('connection timeout'));
      await time.advance(10);
      if (e.fence() !== null) leadingAt = time.now;
    }
    // sent at 0: 0 + 1000 − 200. Counting from the answer would have led until 1100.
    expect(leadingAt).toBeLessThan(TTL - MARGIN);
    expect(leadingAt).toBeGreaterThanOrEqual(TTL - MARGIN - 10);
    await e.stop();
  });

  it('does not act on a grant that came back after its own deadline', async () => {
    const { time, leases, e } = elector();
    e.start();
    await time.advance(0);
    await time.advance(TTL - MARGIN + 50);
    leases.last().answer.resolve(grant(3));
    await time.advance(0);
    expect(e.fence()).toBeNull();
    await e.stop();
  });

  it('stops leading at once when a renewal is refused, well before the deadline', async () => {
    const { time, leases, e } = elector();
    const changes: boolean[] = [];
    e.onChange((leading) => changes.push(leading));
    e.start();
    await time.advance(0);
    leases.last().answer.resolve(grant(1));
    await time.advance(RENEW);
    expect(leases.last()).toMatchObject({ op: 'renew', epoch: 1 });
    leases.last().answer.resolve(undefined);
    await time.advance(0);
    expect(e.fence()).toBeNull();
    expect(changes).toEqual([true, false]);
    // And it contends again by acquiring, not by renewing the lost term.
    await time.advance(RENEW);
    expect(leases.last().op).toBe('acquire');
    await e.stop();
  });

  it('keeps leading through a failed renewal while its deadline stands, and renews the same epoch', async () => {
    const { time, leases, e } = elector();
    e.start();
    await time.advance(0);
    leases.last().answer.resolve(grant(4));
    await time.advance(RENEW);
    leases.last().answer.reject(new Error('blip'));
    await time.advance(0);
    expect(e.fence()?.epoch).toBe(4);
    await time.advance(RENEW);
    expect(leases.last()).toMatchObject({ op: 'renew', epoch: 4 });
    leases.last().answer.resolve(grant(4));
    await time.advance(0);
    expect(e.fence()?.epoch).toBe(4);
    await e.stop();
  });

  it('on stop, stops acting before it releases the lease, and releases its own epoch', async () => {
    const { time, leases, e } = elector();
    e.start();
    await time.advance(0);
    leases.last().answer.resolve(grant(9));
    await time.advance(0);
    let fenceDuringRelease: unknown = 'not called';
    const release = leases.release.bind(leases);
    leases.release = (n, h, epoch) => {
      fenceDuringRelease = e.fence();
      return release(n, h, epoch);
    };
    await e.stop();
    expect(fenceDuringRelease).toBeNull();
    expect(leases.last()).toMatchObject({ op: 'release', epoch: 9 });
  });

  it('refuses timings under which the deadline would pass before the next renewal', () => {
    const leases = new ScriptedLeases();
    const logger = pino({ level: 'silent' });
    expect(
      () =>
        new LeaseElector({
          leases,
          holder: 'h',
          ttlMs: 1_000,
          renewIntervalMs: 800,
          safetyMarginMs: 200,
          logger,
        }),
    ).toThrow(expect.objectContaining({ code: 'LF_CONFIG_INVALID' }) as Error);
  });
});
