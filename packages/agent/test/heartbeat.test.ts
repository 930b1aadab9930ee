import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { HeartbeatResponseSchema } from '@leoflow/protocol';
import { describe, expect, it } from 'vitest';
import { HeartbeatLoop, type HeartbeatTimers } from '../src/heartbeat.js';
import { TokenHolder } from '../src/token.js';

/** A manual clock: timers fire only when the test advances it. No sleeping. */
class ManualTimers implements HeartbeatTimers {
  t = 0;
  private seq = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  set(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.pending.set(id, { at: this.t + ms, fn });
    return id;
  }
  clear(h: unknown): void {
    this.pending.delete(h as number);
  }
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await flush(); // replies already resolved land before the next timer fires
    for (;;) {
      const next = [...this.pending.entries()]
        .filter(([, p]) => p.at <= end)
        .sort((a, b) => a[1].at - b[1].at)[0];
      if (!next) break;
      this.pending.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
      await flush();
    }
    this.t = end;
    await flush();
  }
}

async function flush() {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

function loop(
  timers: ManualTimers,
  replies: (n: number) => MessageInitShape<typeof HeartbeatResponseSchema> | Error,
) {
  const tokens = new TokenHolder('tok-1');
  const sent: { at: number; bearer: string }[] = [];
  const terminated: string[] = [];
  const logs: string[] = [];
  const hb = new HeartbeatLoop({
    intervalMs: 15_000,
    timers,
    tokens,
    send: (at) => {
      sent.push({ at, bearer: tokens.current() });
      const r = replies(sent.length);
      return r instanceof Error
        ? Promise.reject(r)
        : Promise.resolve(create(HeartbeatResponseSchema, r));
    },
    onTerminate: (reason) => terminated.push(reason),
    log: (_l, m) => logs.push(m),
  });
  return { hb, tokens, sent, terminated, logs };
}

describe('agent heartbeat loop on a manual clock', () => {
  it('beats at start and every interval; a renewal is used by the very next call; an empty one changes nothing', async () => {
    const timers = new ManualTimers();
    const l = loop(timers, (n) => (n === 2 ? { renewedToken: 'tok-2' } : { renewedToken: '' }));
    l.hb.start();
    await flush();
    expect(l.sent).toEqual([{ at: 0, bearer: 'tok-1' }]);
    await timers.advance(14_999);
    expect(l.sent).toHaveLength(1);
    await timers.advance(1);
    expect(l.sent[1]).toEqual({ at: 15_000, bearer: 'tok-1' });
    expect(l.tokens.current()).toBe('tok-2');
    await timers.advance(15_000);
    expect(l.sent[2]).toEqual({ at: 30_000, bearer: 'tok-2' });
    await timers.advance(15_000);
    expect(l.sent[3]!.bearer).toBe('tok-2'); // the empty renewal kept it
    expect(l.logs).toContain('bearer token renewed');
    l.hb.stop();
    await timers.advance(60_000);
    expect(l.sent).toHaveLength(4);
  });

  it('a failed beat is logged and the loop continues; should_terminate is passed on', async () => {
    const timers = new ManualTimers();
    const l = loop(timers, (n) =>
      n === 1
        ? new Error('unavailable')
        : n === 3
          ? { shouldTerminate: true, terminateReason: 'x' }
          : {},
    );
    l.hb.start();
    await timers.advance(30_000);
    expect(l.sent.map((s) => s.at)).toEqual([0, 15_000, 30_000]);
    expect(l.logs.some((m) => m.startsWith('heartbeat failed'))).toBe(true);
    expect(l.terminated).toEqual(['x']);
  });

  it('never sends two beats at once: a slow reply skips the overlapping tick', async () => {
    const timers = new ManualTimers();
    let release: (() => void) | undefined;
    const tokens = new TokenHolder('t');
    const sent: number[] = [];
    const hb = new HeartbeatLoop({
      intervalMs: 15_000,
      timers,
      tokens,
      send: (at) => {
        sent.push(at);
        return sent.length === 1
          ? new Promise((r) => (release = () => r(create(HeartbeatResponseSchema, {}))))
          : Promise.resolve(create(HeartbeatResponseSchema, {}));
      },
      onTerminate: () => undefined,
      log: () => undefined,
    });
    hb.start();
    await timers.advance(15_000);
    expect(sent).toEqual([0]);
    release!();
    await flush();
    await timers.advance(15_000);
    expect(sent).toEqual([0, 30_000]);
    hb.stop();
  });
});
