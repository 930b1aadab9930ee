import http2 from 'node:http2';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type ServiceImpl } from '@connectrpc/connect';
import {
  connectNodeAdapter,
  createGrpcTransport,
  Http2SessionManager,
} from '@connectrpc/connect-node';
import { AgentService, FetchXComResponseSchema, HeartbeatResponseSchema } from '@leoflow/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createWebSocketStream, WebSocket } from 'ws';
import { createDoorFixture, type DoorFixture } from './door-fixture.js';

/**
 * Spike (issue 16, the runner protocol): HTTP/2 over the door's WebSocket stream carries the
 * agent service unchanged — gRPC framing, the Authorization header, trailers and errors — from a
 * runner-side client, through the door, to a cell-side Connect handler. No framing of our own:
 * the WebSocket is a byte pipe (ws's createWebSocketStream), HTTP/2 runs on top of it.
 */
describe('spike: HTTP/2 over the door session carries the agent service', () => {
  let f: DoorFixture;
  let seenAuth: string[];
  const h2 = http2.createServer(
    connectNodeAdapter({
      routes: (router) =>
        router.service(AgentService, {
          heartbeat(req, ctx) {
            seenAuth.push(ctx.requestHeader.get('authorization') ?? '');
            if (ctx.requestHeader.get('authorization') !== 'Bearer attempt-token') {
              throw new ConnectError('no attempt credential', Code.Unauthenticated);
            }
            return create(HeartbeatResponseSchema, { serverTimeMs: req.sentAtMs + 1n });
          },
          fetchXCom(req) {
            return create(FetchXComResponseSchema, {
              found: true,
              value: new Uint8Array(Buffer.from(`xcom of ${req.upstreamTaskId}`.repeat(4096))),
              contentType: 'text/plain',
            });
          },
        } satisfies Partial<ServiceImpl<typeof AgentService>>),
    }),
  );

  beforeEach(async () => {
    seenAuth = [];
    f = await createDoorFixture({
      // the cell: every accepted session becomes one HTTP/2 connection of a Connect server
      onSession: (_cell, _grant, ws) => {
        h2.emit('connection', createWebSocketStream(ws));
      },
    });
    await f.addCell('cell-a');
    await f.place('team-a', 'cell-a');
  });
  afterEach(() => f.close());

  it('unary calls, headers, big replies and errors go through unchanged', async () => {
    const { token } = await f.addRunner('team-a', 'lin-1');
    // the runner: a WebSocket to the door, HTTP/2 on top of it
    const ws = new WebSocket(`${f.url.replace('http:', 'ws:')}/runners/${token}/session`);
    // The stream must exist by the time 'open' returns: the cell speaks first (HTTP/2's
    // SETTINGS) and a frame that arrives before a listener is attached is gone — awaiting a
    // promise before attaching it is already too late (the runner daemon must do the same).
    const stream = await new Promise<ReturnType<typeof createWebSocketStream>>((res, rej) => {
      ws.once('open', () => res(createWebSocketStream(ws)));
      ws.once('error', rej);
    });
    let connections = 0;
    const sessionManager = new Http2SessionManager('http://runner-session', undefined, {
      createConnection: () => {
        connections += 1;
        return stream;
      },
    });
    const client = createClient(
      AgentService,
      createGrpcTransport({ baseUrl: 'http://runner-session', sessionManager }),
    );
    const first = await client.heartbeat(
      { sentAtMs: 0n },
      { headers: { authorization: 'Bearer attempt-token' } },
    );
    expect(first.serverTimeMs).toBe(1n);
    const calls = Array.from({ length: 20 }, (_, i) =>
      client.heartbeat(
        { sentAtMs: BigInt(i) },
        { headers: { authorization: 'Bearer attempt-token' } },
      ),
    );
    const replies = await Promise.all(calls);
    expect(replies.map((r) => r.serverTimeMs)).toEqual(
      Array.from({ length: 20 }, (_, i) => BigInt(i) + 1n),
    );
    const big = await client.fetchXCom({ upstreamTaskId: 'a', key: 'return_value' });
    expect(big.value.byteLength).toBe(Buffer.byteLength('xcom of a') * 4096);
    await expect(client.heartbeat({ sentAtMs: 1n })).rejects.toMatchObject({
      code: Code.Unauthenticated,
    });
    // the runner's door token never reached the cell's handler; the attempt credential did
    expect(seenAuth.filter((a) => a.includes(token))).toEqual([]);
    expect(seenAuth).toContain('Bearer attempt-token');
    // one door session, one secret fetch, however many calls
    expect(f.cells.get('cell-a')!.calls).toEqual({ secrets: 1, sessions: 1 });
    expect(connections).toBe(1);
    sessionManager.abort();
    ws.close();
  });
});
