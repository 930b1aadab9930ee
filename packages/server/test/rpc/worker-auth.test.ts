import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type ServiceImpl } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ManualClock } from '@leoflow/core';
import { AgentService } from '@leoflow/protocol';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentTokenIssuer } from '../../src/auth/agent-token.js';
import { loadSigningKeyring, type FileSigningKeyring } from '../../src/auth/signing-keys.js';
import { WorkerTokenIssuer } from '../../src/auth/worker-token.js';
import {
  AGENT_PRINCIPAL,
  createAgentAuthentication,
  WORKER_TOKEN_REFUSAL,
  type AgentPrincipal,
} from '../../src/rpc/agent-auth.js';
import { startAgentRpcServer, type AgentRpcServer } from '../../src/rpc/agent-server.js';
import { identity, T0, useTempDirs } from '../auth/fixtures.js';

/** A warm-pool worker token opens Register and AwaitAssignment, and nothing else (T82/T83). */

const tempDir = useTempDirs();
let ring: FileSigningKeyring;
let attempts: AgentTokenIssuer;
let workers: WorkerTokenIssuer;
let server: AgentRpcServer | null = null;

beforeAll(async () => {
  ring = await loadSigningKeyring(tempDir(), 'agent', { nowMs: T0 });
  attempts = new AgentTokenIssuer(ring, 600);
  workers = new WorkerTokenIssuer(ring, 600);
});
afterEach(async () => {
  await server?.close();
  server = null;
});

const WORKER_RPCS = ['register', 'awaitAssignment'];

async function start(withWorkers = true) {
  const clock = new ManualClock(T0);
  const seen: AgentPrincipal['kind'][] = [];
  const impl: Record<string, unknown> = {};
  for (const m of AgentService.methods) {
    impl[m.localName] =
      m.methodKind === 'server_streaming'
        ? async function* (_req: unknown, ctx: { values: { get: (k: unknown) => unknown } }) {
            seen.push((ctx.values.get(AGENT_PRINCIPAL) as AgentPrincipal).kind);
            yield* [];
          }
        : (_req: unknown, ctx: { values: { get: (k: unknown) => unknown } }) => {
            seen.push((ctx.values.get(AGENT_PRINCIPAL) as AgentPrincipal).kind);
            return create(m.output, {});
          };
  }
  const auth = createAgentAuthentication({
    verifier: attempts,
    clock,
    ...(withWorkers ? { workerVerifier: workers } : {}),
  });
  server = await startAgentRpcServer({
    impl: impl as ServiceImpl<typeof AgentService>,
    host: '127.0.0.1',
    port: 0,
    auth,
  });
  const port = server.port;
  const call = async (token: string, name: string): Promise<'ok' | [Code, string]> => {
    const client = createClient(
      AgentService,
      createGrpcTransport({
        baseUrl: `http://127.0.0.1:${port}`,
        interceptors: [
          (next) => (req) => {
            req.header.set('authorization', `Bearer ${token}`);
            return next(req);
          },
        ],
      }),
    ) as unknown as Record<string, (r: object) => unknown>;
    try {
      const r = client[name]!({});
      if (r && typeof (r as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
        for await (const _ of r as AsyncIterable<unknown>) void _;
      } else await r;
      return 'ok';
    } catch (err) {
      const e = ConnectError.from(err);
      return [e.code, e.rawMessage];
    }
  };
  return { clock, seen, call };
}

const worker = { pool_key: 'wp-1', tenant_id: 'acme', pod_name: 'w-1', pod_uid: 'u-1' };

describe('a worker token on the real agent port', () => {
  it('serves Register and AwaitAssignment as a worker principal; every other RPC answers PermissionDenied', async () => {
    const s = await start();
    const { token } = await workers.mint(worker, T0);
    const others = AgentService.methods
      .map((m) => m.localName)
      .filter((n) => !WORKER_RPCS.includes(n));
    // The list is the contract written out, so a new RPC is checked here too.
    expect(others.sort()).toEqual(
      [
        'ackAssignment',
        'exchangeToken',
        'fetchXCom',
        'getConnections',
        'getTaskSpec',
        'getVariables',
        'heartbeat',
        'pushLogs',
        'pushXCom',
        'reportState',
      ].sort(),
    );
    for (const name of others) {
      // The exchange takes no Leoflow bearer at all: any bearer on it is refused, a worker's too.
      const refusal =
        name === 'exchangeToken' ? 'this RPC is not open to agents' : WORKER_TOKEN_REFUSAL;
      expect([name, await s.call(token, name)]).toEqual([name, [Code.PermissionDenied, refusal]]);
    }
    expect(s.seen).toEqual([]);
    for (const name of WORKER_RPCS) expect([name, await s.call(token, name)]).toEqual([name, 'ok']);
    expect(s.seen).toEqual(['worker', 'worker']);
  });

  it('an attempt token cannot open AwaitAssignment (the runner/worker-only stream)', async () => {
    const s = await start();
    const token = await attempts.mint(identity, T0);
    expect(await s.call(token, 'awaitAssignment')).toEqual([
      Code.PermissionDenied,
      'this RPC is open to runners in their door session only',
    ]);
  });

  it('an expired worker token opens nothing (renewal comes on the stream, never after exp)', async () => {
    const s = await start();
    const { token } = await workers.mint(worker, T0);
    s.clock.advance(700_000);
    for (const name of WORKER_RPCS) {
      const r = await s.call(token, name);
      expect(r).not.toBe('ok');
      expect((r as [Code, string])[0]).toBe(Code.Unauthenticated);
    }
  });

  it('with warm pools off (no worker verifier) a worker token is just an invalid bearer', async () => {
    const s = await start(false);
    const { token } = await workers.mint(worker, T0);
    const r = await s.call(token, 'register');
    expect((r as [Code, string])[0]).toBe(Code.Unauthenticated);
  });
});
