import { readFileSync } from 'node:fs';
import { create } from '@bufbuild/protobuf';
import {
  Code,
  ConnectError,
  createClient,
  createRouterTransport,
  type ServiceImpl,
} from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ManualClock } from '@leoflow/core';
import {
  AgentService,
  GetVariablesResponseSchema,
  HeartbeatResponseSchema,
  SESSION_HEADER,
} from '@leoflow/protocol';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  AgentTokenIssuer,
  type AgentTokenClaims,
  type AgentTokenVerification,
} from '../../src/auth/agent-token.js';
import { loadOrCreateSigningKey } from '../../src/auth/signing-keys.js';
import {
  AGENT_RPC_ACCESS,
  AGENT_RPC_SESSION,
  attemptPrincipal,
  createAgentAuthentication,
  type AgentPrincipal,
} from '../../src/rpc/agent-auth.js';
import { startAgentRpcServer, type AgentRpcServer } from '../../src/rpc/agent-server.js';
import { identity, T0, useTempDirs } from '../auth/fixtures.js';
import type { SessionVerdict, UnboundReason } from '../../src/attempts/session-binding.js';

const UNBOUND = (what: string) =>
  `LF_CREDENTIAL_UNBOUND: this attempt's credential works only with the session key of the agent that registered it, and ${what}. If this is the attempt's own agent, let the attempt fail and clear the task for a fresh one; otherwise the token was copied (audited as credential.unbound_use).`;
const NO_KEY = UNBOUND('this request carried no session key');
const OTHER_KEY = UNBOUND('this request carried another session key');

/** A binding of key 's' to every attempt (or to none), recording each refusal it is told of. */
function fakeSessions(bound: boolean) {
  const refused: [string, UnboundReason][] = [];
  return {
    refused,
    check: (_c: AgentTokenClaims, key: string): Promise<SessionVerdict> =>
      Promise.resolve(
        !bound ? 'unregistered' : key === '' ? 'no_key' : key === 's' ? 'bound' : 'other_key',
      ),
    refusedUse: (_c: AgentTokenClaims, rpc: string, reason: UnboundReason): Promise<void> => {
      refused.push([rpc, reason]);
      return Promise.resolve();
    },
  };
}

/**
 * Agent authentication is one interceptor (issue 12): the gate verifies the bearer once, the
 * interceptor puts a typed principal on the call context, and one table says which RPC takes an
 * expired, session-bound credential.
 */

const tempDir = useTempDirs();
const TTL = 600;
let issuer: AgentTokenIssuer;

beforeAll(async () => {
  issuer = new AgentTokenIssuer(await loadOrCreateSigningKey(tempDir(), 'agent'), TTL);
});

/** Counts every signature verification that reaches the issuer. */
function counting(inner: AgentTokenIssuer): AgentTokenVerification & { calls: number } {
  const v = {
    calls: 0,
    verify(token: string, now: number): Promise<AgentTokenClaims> {
      v.calls++;
      return inner.verify(token, now);
    },
    verifyIgnoringExpiry(token: string, now: number): Promise<AgentTokenClaims> {
      v.calls++;
      return inner.verifyIgnoringExpiry(token, now);
    },
  };
  return v;
}

/** A service whose two handlers report the principal they saw. */
function echoService(seen: AgentPrincipal[]): ServiceImpl<typeof AgentService> {
  return {
    heartbeat(_req, ctx) {
      seen.push(attemptPrincipal(ctx));
      return create(HeartbeatResponseSchema, {});
    },
    getVariables(_req, ctx) {
      seen.push(attemptPrincipal(ctx));
      return create(GetVariablesResponseSchema, {});
    },
  } as Partial<ServiceImpl<typeof AgentService>> as ServiceImpl<typeof AgentService>;
}

/** Answers every RPC with an empty reply, recording the principal it was handed. */
function echoEverything(seen: AgentPrincipal[]): ServiceImpl<typeof AgentService> {
  const impl: Record<string, unknown> = {};
  for (const m of AgentService.methods) {
    impl[m.localName] = (_req: unknown, ctx: Parameters<typeof attemptPrincipal>[0]) => {
      seen.push(attemptPrincipal(ctx));
      return create(m.output, {});
    };
  }
  return impl as ServiceImpl<typeof AgentService>;
}

function headers(token: string | null, session?: string) {
  return [
    (next: Parameters<import('@connectrpc/connect').Interceptor>[0]) =>
      (req: Parameters<typeof next>[0]) => {
        if (token !== null) req.header.set('authorization', `Bearer ${token}`);
        if (session !== undefined) req.header.set(SESSION_HEADER, session);
        return next(req);
      },
  ];
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

describe('AGENT_RPC_ACCESS', () => {
  it('has exactly one row per AgentService RPC', () => {
    expect(Object.keys(AGENT_RPC_ACCESS).sort()).toEqual(
      AgentService.methods.map((m) => m.localName).sort(),
    );
  });

  it('matches the "past exp" column of docs/credentials.md', () => {
    const doc = readFileSync(new URL('../../../../docs/credentials.md', import.meta.url), 'utf8');
    const documented: Record<string, string> = {};
    const section = doc.slice(
      doc.indexOf('### Which RPC checks what'),
      doc.indexOf('## An expired credential'),
    );
    for (const line of section.split('\n')) {
      const m = /^\| `(\w+)`\s*\|.*\|\s*([^|]+?)\s*\|$/.exec(line);
      if (m?.[1] && m[2]) documented[m[1]] = m[2];
    }
    const fromCode: Record<string, string> = {};
    for (const m of AgentService.methods) {
      const access = AGENT_RPC_ACCESS[m.localName as keyof typeof AGENT_RPC_ACCESS].attempt;
      fromCode[m.name] =
        access === 'unexpired-or-session-bound' ? 'with the session key' : 'refused';
    }
    expect(documented).toEqual(fromCode);
  });

  it('matches the "session key" column of docs/credentials.md', () => {
    const doc = readFileSync(new URL('../../../../docs/credentials.md', import.meta.url), 'utf8');
    const section = doc.slice(
      doc.indexOf('### Which RPC checks what'),
      doc.indexOf('## An expired credential'),
    );
    const cells = (line: string) => line.split(/(?<!\\)\|/).map((c) => c.trim());
    const header = section.split('\n').find((l) => l.startsWith('| RPC'))!;
    const col = cells(header).indexOf('session key');
    expect(col).toBeGreaterThan(0);
    const documented: Record<string, string> = {};
    for (const line of section.split('\n')) {
      const m = /^\| `(\w+)`/.exec(line);
      if (m?.[1]) documented[m[1]] = cells(line)[col]!;
    }
    const words = {
      binds: 'binds it',
      'before-register': 'not needed (before Register)',
      required: 'required',
      none: '—',
    };
    const fromCode: Record<string, string> = {};
    for (const m of AgentService.methods)
      fromCode[m.name] = words[AGENT_RPC_SESSION[m.localName as keyof typeof AGENT_RPC_SESSION]];
    expect(documented).toEqual(fromCode);
  });

  it('opens to the runner principal exactly the rows docs/credentials.md says take the door session', () => {
    const doc = readFileSync(new URL('../../../../docs/credentials.md', import.meta.url), 'utf8');
    const section = doc.slice(
      doc.indexOf('### Which RPC checks what'),
      doc.indexOf('## An expired credential'),
    );
    const documented = section
      .split('\n')
      .flatMap((line) => {
        const m = /^\| `(\w+)`\s*\|([^|]*)\|/.exec(line);
        return m?.[1] && m[2]?.includes('door session') ? [m[1]] : [];
      })
      .sort();
    const fromCode = AgentService.methods
      .filter(
        (m) =>
          AGENT_RPC_ACCESS[m.localName as keyof typeof AGENT_RPC_ACCESS].runner === 'door-session',
      )
      .map((m) => m.name)
      .sort();
    expect(fromCode).toEqual(['AwaitAssignment']);
    expect(documented).toEqual(fromCode);
  });
});

describe('the authentication interceptor on the real agent port', () => {
  let server: AgentRpcServer | null = null;
  afterEach(async () => {
    await server?.close();
    server = null;
  });

  async function start(opts: { registered?: boolean; everything?: boolean } = {}) {
    const clock = new ManualClock(T0);
    const verifier = counting(issuer);
    const seen: AgentPrincipal[] = [];
    const sessions = fakeSessions(opts.registered !== false);
    const auth = createAgentAuthentication({
      verifier,
      clock,
      sessions: { check: sessions.check, refused: sessions.refusedUse },
    });
    server = await startAgentRpcServer({
      impl: opts.everything ? echoEverything(seen) : echoService(seen),
      host: '127.0.0.1',
      port: 0,
      auth,
    });
    const port = server.port;
    const client = (token: string | null, session?: string) =>
      createClient(
        AgentService,
        createGrpcTransport({
          baseUrl: `http://127.0.0.1:${port}`,
          interceptors: headers(token, session),
        }),
      );
    return { clock, verifier, seen, client, refused: sessions.refused };
  }

  it('verifies the signature once per request and hands the handler an attempt principal', async () => {
    const s = await start();
    const token = await issuer.mint(identity, T0);
    await s.client(token, 's').heartbeat({});
    await s.client(token, 's').getVariables({});
    expect(s.verifier.calls).toBe(2);
    expect(s.seen).toEqual([
      { kind: 'attempt', claims: expect.objectContaining(identity), expired: false },
      { kind: 'attempt', claims: expect.objectContaining(identity), expired: false },
    ]);
  });

  it('past exp: a session-bound RPC takes the token only with the session key; the others refuse it', async () => {
    const s = await start();
    const token = await issuer.mint(identity, T0);
    s.clock.advance((TTL + 60) * 1000);
    expect(await codeOf(s.client(token).heartbeat({}))).toEqual([Code.Unauthenticated, NO_KEY]);
    expect(await codeOf(s.client(token, 'wrong').heartbeat({}))).toEqual([
      Code.Unauthenticated,
      OTHER_KEY,
    ]);
    expect(await codeOf(s.client(token, 's').getVariables({}))).toEqual([
      Code.Unauthenticated,
      'agent token expired',
    ]);
    expect(await codeOf(s.client(token, 's').heartbeat({}))).toBe('ok');
    expect(s.seen).toEqual([
      { kind: 'attempt', claims: expect.objectContaining(identity), expired: true },
    ]);
    expect(s.refused).toEqual([
      ['heartbeat', 'no_key'],
      ['heartbeat', 'other_key'],
    ]);
  });

  it('each of the nine RPCs, both sides: with the bound key a live token always serves, past exp only the four reports; without it (or with another) only Register and AckAssignment, whatever exp says', async () => {
    // The contract (seed 001 + issues 11 and 34), written out rather than read from the tables.
    const reports = ['heartbeat', 'reportState', 'pushXCom', 'pushLogs'];
    const beforeRegister = ['register', 'ackAssignment'];
    const attemptRpcs = [
      'register',
      'getTaskSpec',
      'heartbeat',
      'reportState',
      'pushXCom',
      'fetchXCom',
      'pushLogs',
      'getVariables',
      'getConnections',
      'ackAssignment',
    ];
    const s = await start({ everything: true });
    const token = await issuer.mint(identity, T0);
    const call = (t: string, session: string | undefined, name: string) =>
      codeOf(
        (s.client(t, session) as unknown as Record<string, (r: object) => Promise<unknown>>)[name]!(
          {},
        ),
      );
    const rpcs = AgentService.methods.filter((x) => attemptRpcs.includes(x.localName));
    expect(rpcs).toHaveLength(10);
    for (const m of rpcs) {
      // availability: the agent that registered, live
      expect([m.localName, await call(token, 's', m.localName)]).toEqual([m.localName, 'ok']);
      // security: a copy of the live token, without the key or with its own
      const unbound = beforeRegister.includes(m.localName);
      expect([m.localName, await call(token, undefined, m.localName)]).toEqual([
        m.localName,
        unbound ? 'ok' : [Code.Unauthenticated, NO_KEY],
      ]);
      expect([m.localName, await call(token, 'copy', m.localName)]).toEqual([
        m.localName,
        unbound ? 'ok' : [Code.Unauthenticated, OTHER_KEY],
      ]);
    }
    // The exchange takes no Leoflow bearer: an attempt token opens nothing there.
    expect(await call(token, 's', 'exchangeToken')).toEqual([
      Code.PermissionDenied,
      'this RPC is not open to agents',
    ]);
    s.clock.advance((TTL + 60) * 1000);
    for (const m of rpcs) {
      const expired: [Code, string] = [Code.Unauthenticated, 'agent token expired'];
      const report = reports.includes(m.localName);
      expect([m.localName, await call(token, undefined, m.localName)]).toEqual([
        m.localName,
        report ? [Code.Unauthenticated, NO_KEY] : expired,
      ]);
      expect([m.localName, await call(token, 's', m.localName)]).toEqual([
        m.localName,
        report ? 'ok' : expired,
      ]);
    }
  });

  it('before any Register, a live token opens nothing but Register and AckAssignment', async () => {
    const s = await start({ registered: false, everything: true });
    const token = await issuer.mint(identity, T0);
    expect(await codeOf(s.client(token, 's').register({}))).toBe('ok');
    expect(await codeOf(s.client(token, 's').ackAssignment({}))).toBe('ok');
    expect(await codeOf(s.client(token, 's').getVariables({}))).toEqual([
      Code.Unauthenticated,
      UNBOUND('the attempt has not registered yet (Register binds the key first)'),
    ]);
    expect(s.refused).toEqual([['getVariables', 'unregistered']]);
  });

  it('a binding the store cannot read answers Unavailable (retry), never a grant', async () => {
    const clock = new ManualClock(T0);
    const auth = createAgentAuthentication({
      verifier: issuer,
      clock,
      sessions: {
        check: () => Promise.reject(new Error('datastore blip')),
        refused: () => Promise.resolve(),
      },
    });
    server = await startAgentRpcServer({
      impl: echoEverything([]),
      host: '127.0.0.1',
      port: 0,
      auth,
    });
    const client = createClient(
      AgentService,
      createGrpcTransport({
        baseUrl: `http://127.0.0.1:${server.port}`,
        interceptors: headers(await issuer.mint(identity, T0), 's'),
      }),
    );
    expect(await codeOf(client.getVariables({}))).toEqual([
      Code.Unavailable,
      "the attempt's session binding could not be read; retry",
    ]);
  });

  it('the gate refuses a forged or missing bearer before any handler runs', async () => {
    const s = await start();
    const token = await issuer.mint(identity, T0);
    const forged = `${token.slice(0, -4)}AAAA`;
    for (const t of [forged, null]) {
      expect(await codeOf(s.client(t).heartbeat({}))).toEqual([
        Code.Unauthenticated,
        'missing or invalid agent token',
      ]);
    }
    expect(s.seen).toEqual([]);
  });
});

describe('without the agent port gate (in-process transport)', () => {
  it('the interceptor verifies the bearer itself', async () => {
    const clock = new ManualClock(T0);
    const seen: AgentPrincipal[] = [];
    const sessions = fakeSessions(true);
    const auth = createAgentAuthentication({
      verifier: issuer,
      clock,
      sessions: { check: sessions.check, refused: sessions.refusedUse },
    });
    const token = await issuer.mint(identity, T0);
    const client = (t: string | null) =>
      createClient(
        AgentService,
        createRouterTransport((r) => r.service(AgentService, echoService(seen)), {
          transport: { interceptors: headers(t, 's') },
          router: { interceptors: [auth.interceptor] },
        }),
      );
    expect(await codeOf(client(token).heartbeat({}))).toBe('ok');
    expect(await codeOf(client(null).heartbeat({}))).toEqual([
      Code.Unauthenticated,
      'missing authorization token',
    ]);
    expect(await codeOf(client('not-a-jwt').heartbeat({}))).toEqual([
      Code.Unauthenticated,
      'invalid agent token',
    ]);
    expect(seen).toHaveLength(1);
  });

  it('without session bindings every RPC after Register is refused (fail closed)', async () => {
    const clock = new ManualClock(T0);
    const auth = createAgentAuthentication({ verifier: issuer, clock });
    const token = await issuer.mint(identity, T0);
    const client = createClient(
      AgentService,
      createRouterTransport((r) => r.service(AgentService, echoService([])), {
        transport: { interceptors: headers(token, 's') },
        router: { interceptors: [auth.interceptor] },
      }),
    );
    expect((await codeOf(client.heartbeat({})))[0]).toBe(Code.Unauthenticated);
  });

  it('a service mounted without the interceptor fails closed', async () => {
    const seen: AgentPrincipal[] = [];
    const token = await issuer.mint(identity, T0);
    const client = createClient(
      AgentService,
      createRouterTransport((r) => r.service(AgentService, echoService(seen)), {
        transport: { interceptors: headers(token) },
      }),
    );
    expect(await codeOf(client.heartbeat({}))).toEqual([
      Code.Unauthenticated,
      'missing authorization token',
    ]);
    expect(seen).toEqual([]);
  });
});
