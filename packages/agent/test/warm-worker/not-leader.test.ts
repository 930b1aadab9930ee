/**
 * A warm worker whose AwaitAssignment reaches a control-plane replica that does not lead is
 * told so (Unavailable, `leoflow-error-code: LF_WARM_WORKER_NOT_LEADER` in the metadata): only
 * the leader hands out warm assignments. It reconnects on a NEW HTTP/2 connection each time, so
 * a Service can route it elsewhere, with jittered backoff capped at 2 s, and neither exits nor
 * counts it as a failure. In process, against the fake agent service over real HTTP/2; the
 * backoff's waits are recorded, not slept.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { ERROR_CODE_METADATA } from '@leoflow/protocol';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EXIT } from '../../src/agent.js';
import { TokenHolder } from '../../src/token.js';
import { WarmWorker } from '../../src/warm-worker/warm-worker.js';
import { FakeAgentService, defaultSpec } from '../support/fake-agent-service.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

const notLeader = () =>
  new ConnectError(
    'LF_WARM_WORKER_NOT_LEADER: this control-plane replica does not lead',
    Code.Unavailable,
    { [ERROR_CODE_METADATA]: 'LF_WARM_WORKER_NOT_LEADER' },
  );

describe('warm worker: a replica that does not lead', () => {
  it('reconnects on a new connection each time, with jittered backoff capped at 2 s, until it reaches the leader; it neither exits nor recycles', async () => {
    const fake = await FakeAgentService.start({
      spec: defaultSpec(),
      awaitAssignment: async function* (n, _req, signal) {
        if (n <= 3) throw notLeader(); // refused at once
        yield { event: { case: 'keepalive', value: { serverTimeMs: 1n } } };
        if (n === 4) throw notLeader(); // its replica lost the lease mid-stream (a trailer)
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      },
    });
    cleanups.push(() => fake.close());
    const workRoot = mkdtempSync(path.join(os.tmpdir(), 'leoflow-not-leader-'));
    cleanups.push(() => rmSync(workRoot, { recursive: true, force: true }));
    const randoms = [0, 1, 0.5, 0.25];
    const delays: number[] = [];
    const logs: string[] = [];
    const terminate = vi.fn();
    const worker = new WarmWorker({
      agentUrl: fake.url,
      workerToken: new TokenHolder('worker-token'),
      workRoot,
      agentEnv: {},
      attemptUids: undefined,
      diag: { log: (level, message) => logs.push(`${level}: ${message}`) },
      terminate,
      random: () => randoms.shift() ?? 0,
      sleep: (ms) => {
        delays.push(ms);
        return Promise.resolve();
      },
    });
    const exited = worker.run();
    cleanups.push(() => {
      worker.stop();
      return exited.then(() => undefined);
    });
    await vi.waitFor(() => expect(fake.count('AwaitAssignment')).toBe(5), { interval: 5 });
    // one connection per try: the refused one is dropped, not reused
    expect(fake.sessionsOpened).toBe(5);
    // ceilings 1 s, 2 s, 2 s, 2 s (capped), each jittered over its upper half
    expect(delays).toEqual([500, 2000, 1500, 1250]);
    expect(logs.filter((l) => l.includes('LF_WARM_WORKER_NOT_LEADER'))).toHaveLength(4);
    expect(logs.every((l) => l.startsWith('info: '))).toBe(true);
    expect(terminate).not.toHaveBeenCalled();
    worker.stop();
    expect(await exited).toBe(EXIT.OK);
  });

  it('with every replica URL in its list, it moves to the next URL when told NOT_LEADER and stays on the leader', async () => {
    const follower = await FakeAgentService.start({
      spec: defaultSpec(),
      awaitAssignment: async function* () {
        yield* [];
        throw notLeader();
      },
    });
    cleanups.push(() => follower.close());
    const leader = await FakeAgentService.start({
      spec: defaultSpec(),
      awaitAssignment: async function* (_n, _req, signal) {
        yield { event: { case: 'keepalive', value: { serverTimeMs: 1n } } };
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      },
    });
    cleanups.push(() => leader.close());
    const workRoot = mkdtempSync(path.join(os.tmpdir(), 'leoflow-not-leader-'));
    cleanups.push(() => rmSync(workRoot, { recursive: true, force: true }));
    const logs: string[] = [];
    const worker = new WarmWorker({
      agentUrl: `${follower.url},${leader.url}`,
      workerToken: new TokenHolder('worker-token'),
      workRoot,
      agentEnv: {},
      attemptUids: undefined,
      diag: { log: (level, message) => logs.push(`${level}: ${message}`) },
      terminate: vi.fn(),
      sleep: () => Promise.resolve(),
    });
    const exited = worker.run();
    cleanups.push(() => {
      worker.stop();
      return exited.then(() => undefined);
    });
    await vi.waitFor(() => expect(leader.count('AwaitAssignment')).toBe(1), { interval: 5 });
    // one refusal by the follower, then the leader's stream stays open: no further tries
    await new Promise((r) => setTimeout(r, 200));
    expect(follower.count('AwaitAssignment')).toBe(1);
    expect(leader.count('AwaitAssignment')).toBe(1);
    expect(logs).toContain(
      `info: warm worker: leaving ${follower.url}; next connection to ${leader.url}`,
    );
    worker.stop();
    expect(await exited).toBe(EXIT.OK);
  });
});
