import http2 from 'node:http2';
import zlib from 'node:zlib';
import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import {
  AgentService,
  GetConnectionsResponseSchema,
  HeartbeatRequestSchema,
  PushLogsRequestSchema,
} from '@leoflow/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentAuthentication } from '../../src/rpc/agent-auth.js';
import { startAgentRpcServer, type AgentRpcServer } from '../../src/rpc/agent-server.js';
import { servedLean } from '../../src/rpc/grpc-unary.js';

/**
 * Issue 38: the agent port serves unary calls without Connect's streaming pipeline. Wire
 * compatibility, measured: the same raw requests to a port on the lean path and to one that
 * sends everything through Connect get byte-identical answers (headers, body, trailers).
 */

const SVC = `/${AgentService.typeName}`;
const MAX = 64 * 1024;

/** Which path served each call (by RPC), per port. */
const seen: Record<'lean' | 'connect', string[]> = { lean: [], connect: [] };

/** The RPCs the cases call; the rest answer Unimplemented (Connect's rule for a missing method). */
function impl(kind: 'lean' | 'connect'): Partial<ServiceImpl<typeof AgentService>> {
  const note = (rpc: string, ctx: HandlerContext) =>
    seen[kind].push(`${rpc}:${servedLean(ctx) ? 'lean' : 'connect'}`);
  return {
    pushLogs(req, ctx) {
      note('pushLogs', ctx);
      return { acknowledgedThroughLine: BigInt(req.lines.length) };
    },
    heartbeat(req, ctx) {
      note('heartbeat', ctx);
      if (req.sentAtMs === 13n) throw new Error('a bug with a path /etc/secret in its text');
      ctx.responseHeader.set('x-leoflow-test', 'header');
      ctx.responseTrailer.set('x-leoflow-trailer', 'trailer');
      return { serverTimeMs: req.sentAtMs + 1n, renewedToken: 'r'.repeat(40) };
    },
    getVariables(_req, ctx) {
      note('getVariables', ctx);
      throw new ConnectError('task instance is no longer live', Code.PermissionDenied, {
        'leoflow-error-code': 'LF_TEST_CODE',
      });
    },
    getConnections(_req, ctx) {
      note('getConnections', ctx);
      // over Connect's 1 KiB compression threshold
      const connectionUris: Record<string, string> = {};
      for (let i = 0; i < 40; i++)
        connectionUris[`conn_${i}`] = `postgres://u${i}:p${i}@host-${i}.example:5432/db`;
      return create(GetConnectionsResponseSchema, { connectionUris });
    },
    getTaskSpec() {
      return new Promise(() => undefined); // never answers: the deadline case
    },
  };
}

/** Admits any bearer; the interceptor passes calls through (this test is about framing). */
const auth: AgentAuthentication = {
  admit: (a) =>
    Promise.resolve(
      a ? { kind: 'runner-session', runner: { runner_id: 'r', tenant_id: 't' } } : undefined,
    ),
  interceptor: (next) => (req) => next(req),
};

let lean: AgentRpcServer;
let connect: AgentRpcServer;

beforeAll(async () => {
  const start = (unaryPath: 'lean' | 'connect') =>
    startAgentRpcServer({
      impl: impl(unaryPath) as ServiceImpl<typeof AgentService>,
      host: '127.0.0.1',
      port: 0,
      auth,
      maxMessageBytes: MAX,
      unaryPath,
    });
  lean = await start('lean');
  connect = await start('connect');
});

afterAll(async () => {
  await lean?.close();
  await connect?.close();
});

interface Raw {
  headers: Record<string, unknown>;
  body: string;
  trailers: Record<string, unknown>;
}

function rawCall(
  port: number,
  path: string,
  body: Buffer,
  extra: http2.OutgoingHttpHeaders = {},
): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const req = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc+proto',
      te: 'trailers',
      authorization: 'Bearer x',
      ...extra,
    });
    let headers: Record<string, unknown> = {};
    let trailers: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    req.on('response', (h) => {
      const { date: _date, ...rest } = h;
      headers = rest;
    });
    req.on('trailers', (t) => {
      trailers = { ...t };
    });
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', reject);
    req.on('close', () => {
      session.close();
      resolve({ headers, body: Buffer.concat(chunks).toString('hex'), trailers });
    });
    req.end(body);
  });
}

function frame(msg: Uint8Array, flags = 0, declared = msg.length): Buffer {
  const b = Buffer.alloc(5 + msg.length);
  b[0] = flags;
  b.writeUInt32BE(declared, 1);
  b.set(msg, 5);
  return b;
}

const pushLogs = frame(
  toBinary(
    PushLogsRequestSchema,
    create(PushLogsRequestSchema, { lines: [{ message: 'a' }, { message: 'b' }] }),
  ),
);
const heartbeat = (sentAtMs: bigint) =>
  frame(toBinary(HeartbeatRequestSchema, create(HeartbeatRequestSchema, { sentAtMs })));

const CASES: [string, string, Buffer, http2.OutgoingHttpHeaders?][] = [
  ['PushLogs', `${SVC}/PushLogs`, pushLogs],
  [
    'PushLogs, application/grpc',
    `${SVC}/PushLogs`,
    pushLogs,
    { 'content-type': 'application/grpc' },
  ],
  [
    'PushLogs, grpc-encoding identity',
    `${SVC}/PushLogs`,
    pushLogs,
    { 'grpc-encoding': 'identity' },
  ],
  ['PushLogs, empty message', `${SVC}/PushLogs`, frame(new Uint8Array(0))],
  ['Heartbeat: response header and trailer set by the handler', `${SVC}/Heartbeat`, heartbeat(7n)],
  ['Heartbeat: a plain Error in the handler', `${SVC}/Heartbeat`, heartbeat(13n)],
  ['GetVariables: ConnectError with metadata', `${SVC}/GetVariables`, frame(new Uint8Array(0))],
  ['GetConnections', `${SVC}/GetConnections`, frame(new Uint8Array(0))],
  [
    'GetConnections, caller accepts gzip (compressed answer)',
    `${SVC}/GetConnections`,
    frame(new Uint8Array(0)),
    { 'grpc-accept-encoding': 'gzip' },
  ],
  [
    'PushLogs, caller accepts gzip (answer under the threshold)',
    `${SVC}/PushLogs`,
    pushLogs,
    { 'grpc-accept-encoding': 'br, gzip' },
  ],
  ['malformed protobuf', `${SVC}/PushLogs`, frame(Buffer.from([0x0a, 0xff, 0xff, 0xff]))],
  ['length prefix over the cap', `${SVC}/PushLogs`, frame(new Uint8Array(8), 0, MAX + 1)],
  ['two messages', `${SVC}/PushLogs`, Buffer.concat([pushLogs, pushLogs])],
  ['truncated message', `${SVC}/PushLogs`, frame(new Uint8Array(4), 0, 10)],
  ['empty body', `${SVC}/PushLogs`, Buffer.alloc(0)],
  ['short prefix', `${SVC}/PushLogs`, Buffer.from([0, 0])],
  [
    'compressed flag without an encoding',
    `${SVC}/PushLogs`,
    frame(zlib.gzipSync(Buffer.alloc(3)), 1),
  ],
  ['invalid grpc-timeout', `${SVC}/PushLogs`, pushLogs, { 'grpc-timeout': 'soon' }],
  ['valid grpc-timeout', `${SVC}/PushLogs`, pushLogs, { 'grpc-timeout': '5S' }],
  [
    'deadline passes while the handler waits',
    `${SVC}/GetTaskSpec`,
    frame(new Uint8Array(0)),
    { 'grpc-timeout': '50m' },
  ],
  ['unimplemented RPC', `${SVC}/ReportState`, frame(new Uint8Array(0))],
  ['unknown path', `${SVC}/Nope`, frame(new Uint8Array(0))],
];

describe('the lean unary path answers byte for byte as Connect does', () => {
  it.each(CASES)('%s', async (_name, path, body, extra) => {
    if (_name.startsWith('deadline')) {
      // Connect never answers a unary call whose handler never returns, deadline or not (the
      // signal aborts, nothing more): neither may the lean path. Both are cut by the client.
      const race = (port: number) =>
        Promise.race([
          rawCall(port, path, body, extra).then(() => 'answered'),
          new Promise((r) => setTimeout(() => r('silent'), 300)),
        ]);
      expect([await race(lean.port), await race(connect.port)]).toEqual(['silent', 'silent']);
      return;
    }
    const a = await rawCall(lean.port, path, body, extra);
    const b = await rawCall(connect.port, path, body, extra);
    expect(a).toEqual(b);
  });

  it('the lean port served the unary calls itself, and the connect port never did', () => {
    expect(seen.lean.length).toBeGreaterThan(5);
    expect(seen.lean.every((s) => s.endsWith(':lean'))).toBe(true);
    expect(seen.connect.length).toBe(seen.lean.length);
    expect(seen.connect.every((s) => s.endsWith(':connect'))).toBe(true);
  });

  it('a gzip request still goes through Connect (its capped inflater)', async () => {
    const before = seen.lean.length;
    const gz = zlib.gzipSync(
      toBinary(PushLogsRequestSchema, create(PushLogsRequestSchema, { lines: [{ message: 'z' }] })),
    );
    const a = await rawCall(lean.port, `${SVC}/PushLogs`, frame(gz, 1), {
      'grpc-encoding': 'gzip',
    });
    expect(a.trailers['grpc-status']).toBe('0');
    expect(seen.lean.slice(before)).toEqual(['pushLogs:connect']);
  });
});
