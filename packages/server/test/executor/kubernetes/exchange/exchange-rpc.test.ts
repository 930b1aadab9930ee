/**
 * ExchangeToken on the real agent port: the pre-body gate lets exactly this RPC through without
 * a bearer (every other RPC without one is still refused before its body is read); it answers
 * Unimplemented where the exchange is not wired, and refuses a cleartext non-loopback channel.
 */
import http2 from 'node:http2';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  AgentService,
  BootstrapCredentialKind,
  ExchangeTokenResponseSchema,
  LeoflowTokenScope,
} from '@leoflow/protocol';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentAuthentication } from '../../../../src/rpc/agent-auth.js';
import { startAgentRpcServer, type AgentRpcServer } from '../../../../src/rpc/agent-server.js';
import { createAgentService } from '../../../../src/rpc/agent-service/agent-service.js';
import { type AgentServiceDeps } from '../../../../src/rpc/agent-service/deps.js';
import type { TokenExchange } from '../../../../src/executor/kubernetes/exchange/token-exchange.js';

let server: AgentRpcServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(extra: Partial<AgentServiceDeps>) {
  const clock = { now: () => Date.now() };
  const impl = createAgentService({
    store: {} as never,
    specs: {} as never,
    clock,
    tokens: {} as never,
    lifecycle: {} as never,
    logger: pino({ level: 'silent' }),
    heartbeatIntervalMs: 1000,
    maxCredentialLifetimeMs: 0,
    secrets: {} as never,
    sessions: {} as never,
    onChange: () => undefined,
    ...extra,
  });
  const auth = createAgentAuthentication({
    verifier: { verify: () => Promise.reject(new Error('no token verifies here')) },
    clock,
  });
  server = await startAgentRpcServer({ impl, host: '127.0.0.1', port: 0, auth });
  return createClient(
    AgentService,
    createGrpcTransport({ baseUrl: `http://127.0.0.1:${server.port}` }),
  );
}

async function codeOf(p: Promise<unknown>): Promise<[Code, string] | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    const e = ConnectError.from(err);
    return [e.code, e.rawMessage];
  }
}

const body = {
  kind: BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN,
  credential: 'projected-token',
  protocolVersion: 1,
};

describe('ExchangeToken on the agent port', () => {
  it('reaches the exchange without a bearer; nothing else does', async () => {
    const seen: string[] = [];
    const exchange: TokenExchange = (req) => {
      seen.push(req.credential);
      return Promise.resolve(
        create(ExchangeTokenResponseSchema, {
          token: 'attempt-token',
          scope: LeoflowTokenScope.ATTEMPT,
          expiresAtMs: 5n,
        }),
      );
    };
    const client = await start({ exchange, channelMode: 'cleartext-loopback' });
    const res = await client.exchangeToken(body);
    expect([res.token, res.scope]).toEqual(['attempt-token', LeoflowTokenScope.ATTEMPT]);
    expect(seen).toEqual(['projected-token']);
    expect(await codeOf(client.getTaskSpec({}))).toEqual([
      Code.Unauthenticated,
      'missing or invalid agent token',
    ]);
    expect(await codeOf(client.getVariables({}))).toEqual([
      Code.Unauthenticated,
      'missing or invalid agent token',
    ]);
  });

  it('answers Unimplemented where the exchange is not wired', async () => {
    const client = await start({});
    expect(await codeOf(client.exchangeToken(body))).toEqual([
      Code.Unimplemented,
      'the token exchange is not enabled on this control plane (auth.agent_token_transport is not exchange)',
    ]);
  });

  it('refuses a cleartext non-loopback channel, and an unsupported protocol', async () => {
    let called = 0;
    const exchange: TokenExchange = () => {
      called += 1;
      return Promise.reject(new Error('not reached'));
    };
    const insecure = await start({ exchange, channelMode: 'cleartext-non-loopback' });
    expect((await codeOf(insecure.exchangeToken(body)))[0]).toBe(Code.FailedPrecondition);
    await server?.close();
    const old = await start({ exchange, channelMode: 'tls' });
    expect((await codeOf(old.exchangeToken({ ...body, protocolVersion: 999 })))[0]).toBe(
      Code.FailedPrecondition,
    );
    expect(called).toBe(0);
  });

  /**
   * A raw HTTP/2 call whose body never ends: a five-byte gRPC prefix announcing 1 KiB and a few
   * bytes of it, the stream left open. Answers the grpc-status the server sent, or 'waiting' if
   * it sent none within the time (it is still reading the body).
   */
  async function openBodyCall(method: string, withinMs: number): Promise<string> {
    const session = http2.connect(`http://127.0.0.1:${server!.port}`);
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': `/${AgentService.typeName}/${method}`,
        'content-type': 'application/grpc+proto',
        te: 'trailers',
      });
      const prefix = Buffer.from([0, 0, 0, 4, 0]);
      stream.write(Buffer.concat([prefix, Buffer.alloc(16, 1)]));
      return await new Promise<string>((resolve) => {
        const timer = setTimeout(() => resolve('waiting'), withinMs);
        const settle = (headers: http2.IncomingHttpHeaders) => {
          const status = headers['grpc-status'];
          if (status !== undefined) {
            clearTimeout(timer);
            resolve(String(status));
          }
        };
        stream.on('response', settle);
        stream.on('trailers', settle);
        stream.on('error', () => undefined);
        stream.resume();
      });
    } finally {
      session.destroy();
    }
  }

  it('refuses a bearer-less call before reading its body; only the exchange reads one', async () => {
    const exchange: TokenExchange = () => Promise.reject(new Error('not reached'));
    await start({ exchange, channelMode: 'cleartext-loopback' });
    // Refused while the body is still arriving: the gate never waited for it.
    expect(await openBodyCall('GetVariables', 2_000)).toBe(String(Code.Unauthenticated));
    expect(await openBodyCall('Register', 2_000)).toBe(String(Code.Unauthenticated));
    // The exchange takes its credential from the body, so it waits for the body to end.
    expect(await openBodyCall('ExchangeToken', 500)).toBe('waiting');
  });
});
