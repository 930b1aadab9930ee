/**
 * Issue 10, item 5 (control-plane side): a claim (`queued`) whose agent never started because the
 * control plane crashed goes back to `scheduled` without consuming a try — and the credential
 * minted for the abandoned claim stops working, so a late agent cannot make two attempts of the
 * same try overlap. Driven in-process on a manual clock; `restart()` is a fresh scheduler on the
 * same store, as after a crash.
 */
import { createHash } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { ReportedState, ReportStateRequestSchema } from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClaimProbe } from '../../packages/server/src/executor/executor.js';
import type { AttemptLaunch } from '../../packages/server/src/attempts/attempt-launch.js';
import {
  createHarness,
  spec,
  task,
  type Harness,
} from '../../packages/server/test/support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function setup(opts: Parameters<typeof createHarness>[0] = {}) {
  h = await createHarness({ liveness: 'enforce', scoping: 'enforce', ...opts });
  const s = spec({ dag_id: 'crashy', tasks: [task('t', { retries: 2 })] });
  await h.store.putDagVersion('default', s, hash(JSON.stringify(s)), h.clock.now());
  const run = await h.runs.trigger('default', 'crashy', {});
  return { h, run };
}

function hash(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

async function row(harness: Harness, runId: string) {
  const run = await harness.store.getRun('default', 'crashy', runId);
  const [ti] = await harness.store.listTaskInstances(run!.id);
  const history = await harness.store.listTaskInstanceHistory(run!.id);
  return { ti: ti!, history };
}

async function code(p: Promise<unknown>): Promise<Code | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

function report(state: ReportedState) {
  return create(ReportStateRequestSchema, {
    state,
    exitCode: state === ReportedState.SUCCESS ? 0 : 1,
  });
}

describe('a claim orphaned by a control-plane crash', () => {
  it('goes back to scheduled at once, keeps try 1, and is dispatched again with a new generation', async () => {
    const { h, run } = await setup();
    await h.scheduler.tick();
    const [first] = h.executor.take();
    expect(first?.identity.try_number).toBe(1);
    expect((await row(h, run.run_id)).ti.state).toBe('queued');

    // Crash: the agent was never started (RecordingExecutor records no pid). A new process:
    h.clock.advance(1_000);
    const successor = h.restart();
    await successor.tick();

    const [second] = h.executor.take();
    expect(second, 'the successor dispatched the claim again').toBeDefined();
    expect(second!.identity.try_number).toBe(1);
    expect(second!.identity.dispatch_gen).toBe((first!.identity.dispatch_gen ?? 0) + 1);
    const { ti, history } = await row(h, run.run_id);
    expect(ti.state).toBe('queued');
    expect(ti.try_number).toBe(1);
    expect(history).toEqual([]); // no try was consumed

    // The second dispatch runs to success as try 1.
    const agent = h.agent(second!.token);
    await agent.register({ agentVersion: 't', hostname: 'h', pid: 1 });
    const res = await agent.reportState(report(ReportedState.SUCCESS));
    expect(res.shouldTerminate).toBe(false);
    await successor.tick();
    const done = await row(h, run.run_id);
    expect(done.ti.state).toBe('success');
    expect(done.ti.try_number).toBe(1);
    expect(done.history).toEqual([]);
  });

  it("the abandoned claim's credential is fenced out: Register says stop, no secrets, heartbeat or report lands", async () => {
    const { h } = await setup();
    await h.scheduler.tick();
    const [first] = h.executor.take();
    h.clock.advance(1_000);
    const successor = h.restart();
    await successor.tick();
    const [second] = h.executor.take();
    expect(second).toBeDefined();

    // A late agent of the first claim (same task instance, same try) comes alive.
    const late = h.agent(first!.token);
    // Register is fenced, not gated: the queued -> running write does not land for the old
    // generation and the agent is told to stop before any task code runs.
    const reg = await late.register({ agentVersion: 't', hostname: 'h', pid: 2 });
    expect(reg.shouldTerminate).toBe(true);
    // Its Register bound nothing (the write did not land), so every later call is refused before
    // the gate or a fence: a token works only with the session key of the agent that registered
    // (issue 34). The fences themselves are tested with a bound key in
    // packages/server/test/attempts/push-*-fence-race.test.ts.
    const unbound = [
      () => late.getTaskSpec({}),
      () => late.getVariables({}),
      () => late.getConnections({}),
      () => late.heartbeat({ sentAtMs: 0n }),
      () => late.reportState(report(ReportedState.FAILED)),
      () => late.pushXCom({ key: 'return_value', value: new TextEncoder().encode('"x"') }),
      () => late.pushLogs({ lines: [{ lineNumber: 1n, timeMs: 0n, stream: 1, message: 'late' }] }),
    ];
    for (const call of unbound) expect(await code(call())).toBe(Code.Unauthenticated);
  });

  it('a claim whose agent did register is never reset: it carries on as the same attempt', async () => {
    const { h, run } = await setup();
    await h.scheduler.tick();
    const [first] = h.executor.take();
    const agent = h.agent(first!.token);
    await agent.register({ agentVersion: 't', hostname: 'h', pid: 1 });
    h.clock.advance(1_000);
    const successor = h.restart();
    await successor.tick();
    expect(h.executor.take()).toEqual([]);
    expect((await row(h, run.run_id)).ti.state).toBe('running');
    expect((await agent.reportState(report(ReportedState.SUCCESS))).shouldTerminate).toBe(false);
    const done = await row(h, run.run_id);
    expect([done.ti.state, done.ti.try_number, done.history.length]).toEqual(['success', 1, 0]);
  });

  it('an agent the executor finds still alive is waited for, and adopted when it registers', async () => {
    const { h, run } = await setup();
    let probe: 'alive' | 'gone' = 'alive';
    const executor = h.executor as typeof h.executor & {
      probeClaim: () => ClaimProbe;
    };
    const recordingStart = executor.start.bind(executor);
    executor.start = async (launch: AttemptLaunch) => {
      await recordingStart(launch);
      return { pid: 4242, hostname: 'this-host' };
    };
    executor.probeClaim = () => ({ state: probe });
    await h.scheduler.tick();
    const [first] = h.executor.take();
    expect((await row(h, run.run_id)).ti.pid).toBe(4242);

    h.clock.advance(1_000);
    const successor = h.restart();
    await successor.tick();
    expect(h.executor.take()).toEqual([]); // not reset while its agent may still register
    expect((await row(h, run.run_id)).ti.state).toBe('queued');

    const agent = h.agent(first!.token);
    expect(await code(agent.register({ agentVersion: 't', hostname: 'h', pid: 4242 }))).toBe('ok');
    await successor.tick();
    expect(h.executor.take()).toEqual([]);
    await agent.reportState(report(ReportedState.SUCCESS));
    const done = await row(h, run.run_id);
    expect([done.ti.state, done.ti.try_number, done.history.length]).toEqual(['success', 1, 0]);
    probe = 'gone';
  });

  it('an agent that dies before registering frees the claim at once, without a try', async () => {
    const { h, run } = await setup();
    let probe: 'alive' | 'gone' = 'alive';
    const executor = h.executor as typeof h.executor & {
      probeClaim: () => ClaimProbe;
    };
    const recordingStart = executor.start.bind(executor);
    executor.start = async (launch: AttemptLaunch) => {
      await recordingStart(launch);
      return { pid: 4242, hostname: 'this-host' };
    };
    executor.probeClaim = () => ({ state: probe });
    await h.scheduler.tick();
    h.executor.take();
    h.clock.advance(1_000);
    const successor = h.restart();
    await successor.tick();
    expect(h.executor.take()).toEqual([]);
    probe = 'gone';
    await successor.tick();
    const [again] = h.executor.take();
    expect(again?.identity.try_number).toBe(1);
    const { ti, history } = await row(h, run.run_id);
    expect([ti.state, ti.try_number, history.length]).toEqual(['queued', 1, 0]);
  });

  it("a claim of this process's own is still failed by the dispatch-lost reaper (a try is used)", async () => {
    const { h, run } = await setup();
    await h.scheduler.tick();
    h.executor.take();
    h.clock.advance(181_000);
    await h.scheduler.tick();
    const { ti, history } = await row(h, run.run_id);
    expect(ti.try_number).toBe(2);
    expect(history.map((x) => x.error_message)).toEqual([expect.stringMatching(/^dispatch_lost/)]);
  });
});
