/**
 * The cell's side of a runner session, through a real door: HTTP/2 over the door's WebSocket
 * into the real agent service. The session's runner may only wait for assignments; everything
 * an attempt does needs that attempt's own token (in-band in its assignment), exactly as on the
 * agent port. Two-sided throughout: what a live runner/attempt may do goes through, and the same
 * call without the right principal is refused.
 */
import { createHash } from 'node:crypto';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import {
  AGENT_PROTOCOL_VERSION,
  AgentService,
  ReportedState,
  type AwaitAssignmentResponse,
} from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { createWebSocketStream, WebSocket } from 'ws';
import {
  createCellSessionServer,
  type CellSessionServer,
} from '../../../src/runners/cells/cell-session.js';
import { createDoorFixture, type DoorFixture } from '../door/door-fixture.js';
import { createHarness, spec, task, type Harness } from '../../support/harness.js';

let h: Harness | undefined;
let f: DoorFixture | undefined;
let cell: CellSessionServer | undefined;
const closers: Array<() => void> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) c();
  cell?.close();
  await f?.close();
  await h?.close();
  h = f = cell = undefined;
});

async function setup() {
  let fixture: DoorFixture | undefined;
  h = await createHarness({
    rpc: 'http2',
    runners: async (id) => {
      const r = await fixture!.directory.runnerById(id);
      return r && (await fixture!.directory.getRunner(r.tenant_id, r.name));
    },
  });
  const harness = h;
  cell = createCellSessionServer({ impl: harness.agentService, auth: harness.agentAuth });
  const sessions = cell;
  f = fixture = await createDoorFixture({
    onSession: (_cell, grant, ws) => sessions.accept(grant, ws),
  });
  await f.addCell('cell-a');
  await f.place('default', 'cell-a');
  const { token } = await f.addRunner('default', 'lin-1', { labels: { gpu: 'a100' }, capacity: 2 });
  return { h: harness, f: fixture, token };
}

async function trigger(h: Harness, dag_id: string, extra: Parameters<typeof task>[1] = {}) {
  const s = spec({ dag_id, tasks: [task('t', { executor: 'runner', ...extra })] });
  const hash = createHash('sha256').update(JSON.stringify(s)).digest('hex');
  await h.store.putDagVersion('default', s, hash, h.clock.now());
  const run = await h.runs.trigger('default', dag_id, {});
  await h.scheduler.tick();
  return { run, ti: async () => (await h.store.listTaskInstances(run.id))[0]! };
}

/** A runner's HTTP/2 client over its door session (no bearer of its own). */
async function runnerSession(f: DoorFixture, token: string): Promise<Client<typeof AgentService>> {
  const ws = new WebSocket(`${f.url.replace('http:', 'ws:')}/runners/${token}/session`);
  const stream = await new Promise<ReturnType<typeof createWebSocketStream>>((res, rej) => {
    ws.once('open', () => res(createWebSocketStream(ws)));
    ws.once('error', rej);
  });
  const sessionManager = new Http2SessionManager('http://runner-session', undefined, {
    createConnection: () => stream,
  });
  closers.push(() => {
    sessionManager.abort();
    ws.terminate();
  });
  return createClient(
    AgentService,
    createGrpcTransport({ baseUrl: 'http://runner-session', sessionManager }),
  );
}

/** The attempt's token, and the session key its Register bound ('s'), as the runner daemon sends them. */
const bearer = (t: string) => ({
  headers: { authorization: `Bearer ${t}`, 'leoflow-session': 's' },
});

async function codeOf(p: Promise<unknown>): Promise<Code | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

/** Reads events off an AwaitAssignment stream as they come. */
function events(stream: AsyncIterable<AwaitAssignmentResponse>) {
  const it = stream[Symbol.asyncIterator]();
  return {
    next: async (): Promise<AwaitAssignmentResponse['event']> => {
      for (;;) {
        const r = await it.next();
        if (r.done) throw new Error('stream ended');
        if (r.value.event.case !== 'keepalive') return r.value.event;
      }
    },
  };
}

describe('a runner session on the cell', () => {
  it('waits for an attempt, gets it with its own token in-band, and runs it only with that token', async () => {
    const { h, f, token } = await setup();
    const { ti } = await trigger(h, 'on_runner', { runner_labels: { gpu: 'a100' } });
    const queued = await ti();
    expect(queued.state).toBe('queued');
    expect(queued.executor).toBe('runner');
    // nobody connected: the claim is starting (kept), not lost
    expect(
      h.runnerExecutor!.probeClaim(
        { ...queued, queued_at: queued.queued_at!, task_instance_id: queued.id },
        h.clock.now(),
      ).state,
    ).toBe('starting');

    const runner = await runnerSession(f, token);
    const ev = events(
      runner.awaitAssignment({ freeSlots: 2, protocolVersion: AGENT_PROTOCOL_VERSION }),
    );
    const first = await ev.next();
    expect(first.case).toBe('assignment');
    if (first.case !== 'assignment') throw new Error('unreachable');
    const a = first.value;
    expect(a.spec?.taskInstanceId).toBe(queued.id);
    const claims = await h.tokens.verify(a.attemptToken, h.clock.now());
    expect([claims.task_instance_id, claims.dispatch_gen]).toEqual([queued.id, 1]);

    // the session alone is not the attempt: no bearer → refused, on every attempt RPC
    expect(await codeOf(runner.register({ agentVersion: 't', hostname: 'r', pid: 1 }))).toBe(
      Code.Unauthenticated,
    );
    expect(await codeOf(runner.getVariables({}))).toBe(Code.Unauthenticated);
    expect(await codeOf(runner.ackAssignment({ assignmentId: a.assignmentId }))).toBe(
      Code.Unauthenticated,
    );
    // with the attempt's token, in the same session, exactly as on the agent port
    const ack = await runner.ackAssignment(
      { assignmentId: a.assignmentId },
      bearer(a.attemptToken),
    );
    expect(ack.accepted).toBe(true);
    const reg = await runner.register(
      { agentVersion: 't', hostname: 'r', pid: 1, sessionKey: 's' },
      bearer(a.attemptToken),
    );
    expect(reg.shouldTerminate).toBe(false);
    expect((await ti()).state).toBe('running');
    const spec = await runner.getTaskSpec({}, bearer(a.attemptToken));
    expect(spec.spec?.command).toBe('echo t');
    // the attempt's token without the key its Register bound opens nothing (issue 34)
    expect(
      await codeOf(
        runner.getVariables({}, { headers: { authorization: `Bearer ${a.attemptToken}` } }),
      ),
    ).toBe(Code.Unauthenticated);
    h.clock.advance(1_000);
    const hb = await runner.heartbeat({}, bearer(a.attemptToken));
    expect(hb.renewedToken).not.toBe('');
    await runner.reportState({ state: ReportedState.SUCCESS, exitCode: 0 }, bearer(a.attemptToken));
    expect((await ti()).state).toBe('success');
    // its slot is free again once the reconcile sees the row ended
    expect(h.broker!.held).toBe(1);
    await h.runnerExecutor!.reconcile();
    expect(h.broker!.held).toBe(0);
  });

  it('a runner that goes away: its running attempt is reaped by the agent-lost rule and retried, and the retry waits for a runner again', async () => {
    const { h, f, token } = await setup();
    const { ti } = await trigger(h, 'lost_runner', { retries: 1, retry_delay_seconds: 0 });
    const runner = await runnerSession(f, token);
    const ev = events(
      runner.awaitAssignment({ freeSlots: 1, protocolVersion: AGENT_PROTOCOL_VERSION }),
    );
    const first = await ev.next();
    if (first.case !== 'assignment') throw new Error('expected an assignment');
    const t = first.value.attemptToken;
    await runner.ackAssignment({ assignmentId: first.value.assignmentId }, bearer(t));
    await runner.register({ agentVersion: 't', hostname: 'r', pid: 1, sessionKey: 's' }, bearer(t));
    expect((await ti()).state).toBe('running');
    // the runner vanishes: no more heartbeats
    for (const c of closers.splice(0)) c();
    // live side: within the threshold nothing happens
    h.clock.advance(60_000);
    await h.scheduler.tick();
    expect((await ti()).state).toBe('running');
    // dead side: past agent-lost (90 s) the attempt is failed and retried
    h.clock.advance(31_000);
    await h.scheduler.tick();
    const reaped = await ti();
    expect([reaped.try_number, reaped.state]).toEqual([2, 'up_for_retry']);
    await h.runnerExecutor!.reconcile();
    expect(h.broker!.held).toBe(0);
    h.clock.advance(1_000);
    await h.scheduler.tick();
    await h.scheduler.tick();
    const retry = await ti();
    expect(retry.state).toBe('queued');
    // with no runner left (the cell has seen the session go), it waits in the queue
    for (let i = 0; i < 100 && h.broker!.workers > 0; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(h.broker!.workers).toBe(0);
    expect(h.broker!.stateOf(retry.id, 2)).toBe('waiting');
  });

  it('AwaitAssignment is refused outside a door session, with or without an attempt token', async () => {
    const { h } = await setup();
    const { ti } = await trigger(h, 'direct');
    expect((await ti()).state).toBe('queued');
    const direct = (t: string | null) =>
      createClient(
        AgentService,
        createGrpcTransport({
          baseUrl: `http://127.0.0.1:${h.agentPort}`,
          interceptors: [
            (next) => (req) => {
              if (t) req.header.set('authorization', `Bearer ${t}`);
              return next(req);
            },
          ],
        }),
      );
    const drain = async (c: Client<typeof AgentService>) => {
      for await (const _ of c.awaitAssignment({
        freeSlots: 1,
        protocolVersion: AGENT_PROTOCOL_VERSION,
      })) {
        // nothing may arrive
      }
    };
    expect(await codeOf(drain(direct(null)))).toBe(Code.Unauthenticated);
    const attemptToken = await h.tokens.mint(
      {
        tenant_id: 'default',
        dag_id: 'direct',
        dag_run_id: (await ti()).dag_run_id,
        run_id: 'x',
        task_id: 't',
        try_number: 1,
        task_instance_id: (await ti()).id,
        dispatch_gen: 1,
      },
      h.clock.now(),
    );
    expect(await codeOf(drain(direct(attemptToken)))).toBe(Code.PermissionDenied);
    // and nothing was handed out
    expect(h.broker!.waiting).toBe(1);
  });

  it('an attempt is pushed a cancellation on terminate; an ack after its deadline is refused', async () => {
    const { h, f, token } = await setup();
    const one = await trigger(h, 'cancelled');
    const two = await trigger(h, 'late_ack');
    const runner = await runnerSession(f, token);
    const ev = events(
      runner.awaitAssignment({ freeSlots: 2, protocolVersion: AGENT_PROTOCOL_VERSION }),
    );
    const got = [await ev.next(), await ev.next()].map((e) =>
      e.case === 'assignment' ? e.value : undefined,
    );
    const byTi = async (x: typeof one) => {
      const id = (await x.ti()).id;
      return got.find((g) => g?.spec?.taskInstanceId === id)!;
    };
    const a1 = await byTi(one);
    const a2 = await byTi(two);
    await runner.ackAssignment({ assignmentId: a1.assignmentId }, bearer(a1.attemptToken));
    await h.runnerExecutor!.terminate((await one.ti()).id, 1);
    const cancel = await ev.next();
    expect(cancel).toEqual({
      case: 'cancellation',
      value: expect.objectContaining({ assignmentId: a1.assignmentId }),
    });

    h.clock.advance(30_000);
    const late = await runner.ackAssignment(
      { assignmentId: a2.assignmentId },
      bearer(a2.attemptToken),
    );
    expect([late.accepted, late.shouldTerminate]).toEqual([false, true]);
    expect(await ev.next()).toEqual({
      case: 'cancellation',
      value: expect.objectContaining({ assignmentId: a2.assignmentId }),
    });
    // back in the queue and offered again on the same stream, with a fresh token
    const again = await ev.next();
    expect(again.case).toBe('assignment');
    if (again.case === 'assignment') {
      expect(again.value.spec?.taskInstanceId).toBe((await two.ti()).id);
      expect(again.value.assignmentId).not.toBe(a2.assignmentId);
    }
  });
});
