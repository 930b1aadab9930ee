import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { create, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import {
  AgentService,
  AwaitAssignmentResponseSchema,
  type AwaitAssignmentRequest,
  type BootstrapCredentialKind,
  HeartbeatResponseSchema,
  RegisterPrefetchSchema,
  ReportStateResponseSchema,
  TaskSpecSchema,
  TaskType,
  type LogLine,
  type PushXComRequest,
  type RegisterRequest,
  type ReportStateRequest,
  LogStream,
  LeoflowTokenScope,
} from '@leoflow/protocol';

export type SpecInit = MessageInitShape<typeof TaskSpecSchema>;
type HeartbeatInit = MessageInitShape<typeof HeartbeatResponseSchema>;
export type PrefetchInit = MessageInitShape<typeof RegisterPrefetchSchema>;
type ReportInit = MessageInitShape<typeof ReportStateResponseSchema>;
export type AwaitEventInit = MessageInitShape<typeof AwaitAssignmentResponseSchema>;

/** Each hook gets the 1-based call number; throwing (e.g. a ConnectError) fails the RPC. */
export interface Script {
  spec: SpecInit;
  /** may answer later (a promise): Register stays in flight until it settles */
  register?: (
    n: number,
  ) =>
    | { shouldTerminate?: boolean; terminateReason?: string }
    | void
    | Promise<{ shouldTerminate?: boolean; terminateReason?: string } | void>;
  getTaskSpec?: (n: number) => void;
  /**
   * Register's prefetch, answered only when the request asks for it: 'all' answers every part
   * from this script (variables, connections, xcoms, spec) as the control plane does; a function
   * answers what it returns. Absent: an older server, which ignores the request field.
   */
  prefetch?: 'all' | ((req: RegisterRequest) => PrefetchInit | undefined);
  variables?: Record<string, string> | Code;
  /** runs before GetVariables answers (e.g. to cut the call) */
  getVariables?: (n: number) => void;
  connections?: Record<string, string> | Code;
  xcoms?: Record<string, Uint8Array | string>;
  heartbeat?: (n: number) => HeartbeatInit | void;
  pushLogs?: (n: number, lines: readonly LogLine[]) => void;
  reportState?: (n: number) => ReportInit | void;
  pushXCom?: (n: number) => { accepted: boolean; rejectionReason?: string } | void;
  /** ExchangeToken: the credential the agent sent in → the token answered (scope ATTEMPT) */
  exchangeToken?: (credential: string, kind: BootstrapCredentialKind) => string;
  /** the scope ExchangeToken answers with (default ATTEMPT; a warm worker expects WORKER) */
  exchangeScope?: LeoflowTokenScope;
  /** a warm worker's stream: the events to send, until the generator ends or the call goes */
  awaitAssignment?: (
    n: number,
    req: AwaitAssignmentRequest,
    signal: AbortSignal,
  ) => AsyncIterable<AwaitEventInit>;
  ackAssignment?: (n: number) => { accepted: boolean; terminateReason?: string } | void;
  /** the spec by the bearer the call carries (several attempts on one worker); else `spec` */
  specFor?: (authorization: string | null) => SpecInit | undefined;
  /** the variables by bearer; else `variables` */
  variablesFor?: (authorization: string | null) => Record<string, string> | undefined;
}

export interface RecordedCall {
  method: string;
  authorization: string | null;
  /** the leoflow-session header (the agent's session key) */
  session: string | null;
  at: number;
}

export function fail(code: Code, message = 'scripted failure'): never {
  throw new ConnectError(message, code);
}

/** The spec as the subprocess executor encodes it on the pipe (TaskSpec binary, base64). */
export function pipedSpec(overrides: SpecInit = {}): string {
  return Buffer.from(
    toBinary(TaskSpecSchema, create(TaskSpecSchema, defaultSpec(overrides))),
  ).toString('base64');
}

export function defaultSpec(overrides: SpecInit = {}): SpecInit {
  return {
    tenantId: 'default',
    dagId: 'demo',
    dagVersion: 1,
    runId: 'manual__2026-01-01T00:00:00Z',
    taskId: 't1',
    tryNumber: 1,
    maxTries: 1,
    type: TaskType.BASH,
    command: 'echo hello',
    taskInstanceId: 'ti-1',
    ...overrides,
  };
}

/**
 * An in-test AgentService over h2c that records every call (with its bearer) and answers from a
 * script. It is deliberately dumb: it accepts whatever the agent sends so the tests can assert on it.
 */
export class FakeAgentService {
  readonly calls: RecordedCall[] = [];
  readonly logLines: LogLine[] = [];
  /** size of every accepted PushLogs batch */
  readonly logBatches: number[] = [];
  readonly reports: ReportStateRequest[] = [];
  readonly xcomPushes: PushXComRequest[] = [];
  readonly registers: RegisterRequest[] = [];
  readonly #counts = new Map<string, number>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  readonly #sockets = new Set<Socket>();
  /** methods of calls refused at the gate for want of a bearer (a standby's rehearsal) */
  readonly anonymousRefused: string[] = [];
  /** HTTP/2 sessions (connections) agents opened, with or without a call on them */
  sessionsOpened = 0;
  #server: http2.Http2Server | undefined;
  url = '';

  constructor(readonly script: Script) {}

  static async start(script: Script): Promise<FakeAgentService> {
    const fake = new FakeAgentService(script);
    await fake.#listen();
    return fake;
  }

  count(method: string): number {
    return this.#counts.get(method) ?? 0;
  }

  /** Every part from the script, as the control plane's Register answers a live attempt. */
  #prefetchAll(req: RegisterRequest, authorization: string | null): PrefetchInit {
    const s = this.script;
    const spec = s.specFor?.(authorization) ?? s.spec;
    const enc = (v: Uint8Array | string) =>
      typeof v === 'string' ? new TextEncoder().encode(v) : v;
    return {
      ...(typeof s.variables === 'number'
        ? { variablesRefused: 'refused' }
        : { variables: { variables: s.variablesFor?.(authorization) ?? s.variables ?? {} } }),
      ...(typeof s.connections === 'number'
        ? { connectionsRefused: 'refused' }
        : { connections: { connectionUris: s.connections ?? {} } }),
      xcoms: {
        upstreams: (spec.dependsOn ?? []).map((upstreamTaskId) => {
          const v = s.xcoms?.[upstreamTaskId];
          return {
            upstreamTaskId,
            xcom:
              v === undefined
                ? { found: false }
                : { found: true, value: enc(v), contentType: 'text/plain' },
          };
        }),
      },
      ...(req.wantSpec ? { spec: { spec } } : {}),
    };
  }

  callsOf(method: string): RecordedCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** Messages shipped for one stream ('stdout' | 'stderr' | 'agent'), in line-number order. */
  lines(stream?: LogStream): string[] {
    return [...this.logLines]
      .sort((a, b) => Number(a.lineNumber - b.lineNumber))
      .filter((l) => stream === undefined || l.stream === stream)
      .map((l) => l.message);
  }

  #record(method: string, ctx: HandlerContext): number {
    const n = (this.#counts.get(method) ?? 0) + 1;
    this.#counts.set(method, n);
    this.calls.push({
      method,
      authorization: ctx.requestHeader.get('authorization'),
      session: ctx.requestHeader.get('leoflow-session'),
      at: Date.now(),
    });
    return n;
  }

  #routes = (router: ConnectRouter): void => {
    const s = this.script;
    const record = (method: string, ctx: HandlerContext): number => this.#record(method, ctx);
    router.service(AgentService, {
      exchangeToken: (req, ctx) => {
        this.#record('ExchangeToken', ctx);
        if (!s.exchangeToken) throw new ConnectError('exchange not wired', Code.Unimplemented);
        return {
          token: s.exchangeToken(req.credential, req.kind),
          scope: s.exchangeScope ?? LeoflowTokenScope.ATTEMPT,
          expiresAtMs: BigInt(Date.now() + 600_000),
        };
      },
      register: async (req, ctx) => {
        const n = this.#record('Register', ctx);
        const extra = (await s.register?.(n)) ?? {};
        this.registers.push(req);
        const prefetch =
          req.prefetch && !extra.shouldTerminate && s.prefetch
            ? s.prefetch === 'all'
              ? this.#prefetchAll(req, ctx.requestHeader.get('authorization'))
              : s.prefetch(req)
            : undefined;
        return {
          sessionId: 'ti-1',
          serverTimeMs: BigInt(Date.now()),
          ...extra,
          ...(prefetch ? { prefetch } : {}),
        };
      },
      getTaskSpec: (_req, ctx) => {
        const n = this.#record('GetTaskSpec', ctx);
        s.getTaskSpec?.(n);
        const spec = s.specFor?.(ctx.requestHeader.get('authorization')) ?? s.spec;
        return { spec: create(TaskSpecSchema, spec) };
      },
      getVariables: (_req, ctx) => {
        const n = this.#record('GetVariables', ctx);
        s.getVariables?.(n);
        const own = s.variablesFor?.(ctx.requestHeader.get('authorization'));
        if (own) return { variables: own };
        if (typeof s.variables === 'number') fail(s.variables, 'refused');
        return { variables: s.variables ?? {} };
      },
      getConnections: (_req, ctx) => {
        this.#record('GetConnections', ctx);
        if (typeof s.connections === 'number') fail(s.connections, 'refused');
        return { connectionUris: s.connections ?? {} };
      },
      fetchXCom: (req, ctx) => {
        this.#record('FetchXCom', ctx);
        const v = s.xcoms?.[req.upstreamTaskId];
        if (v === undefined) return { found: false };
        return {
          found: true,
          value: typeof v === 'string' ? new TextEncoder().encode(v) : v,
          contentType: 'text/plain',
        };
      },
      heartbeat: (_req, ctx) => {
        const n = this.#record('Heartbeat', ctx);
        return { serverTimeMs: BigInt(Date.now()), ...(s.heartbeat?.(n) ?? {}) };
      },
      pushLogs: (req, ctx) => {
        const n = this.#record('PushLogs', ctx);
        s.pushLogs?.(n, req.lines);
        this.logLines.push(...req.lines);
        this.logBatches.push(req.lines.length);
        const last = req.lines[req.lines.length - 1];
        return { acknowledgedThroughLine: last ? last.lineNumber : 0n };
      },
      reportState: (req, ctx) => {
        const n = this.#record('ReportState', ctx);
        const res = s.reportState?.(n);
        this.reports.push(req);
        return { acknowledged: true, ...(res ?? {}) };
      },
      pushXCom: (req, ctx) => {
        const n = this.#record('PushXCom', ctx);
        const res = s.pushXCom?.(n);
        this.xcomPushes.push(req);
        return res ?? { accepted: true };
      },
      awaitAssignment: async function* (this: void, req, ctx) {
        const n = record('AwaitAssignment', ctx);
        if (!s.awaitAssignment) throw new ConnectError('no assignments here', Code.Unimplemented);
        for await (const e of s.awaitAssignment(n, req, ctx.signal)) {
          yield create(AwaitAssignmentResponseSchema, e);
        }
      },
      ackAssignment: (_req, ctx) => {
        const n = this.#record('AckAssignment', ctx);
        return s.ackAssignment?.(n) ?? { accepted: true };
      },
    });
  };

  /**
   * The control plane dying: every HTTP/2 connection is destroyed at once (calls in flight get
   * no answer) and nothing listens until `comeBack()`. Call it from a hook, then throw, to cut
   * that very call.
   */
  goAway(): void {
    // Close the sockets under the sessions, as the kernel does for a killed process: no GOAWAY,
    // no RST_STREAM, just the connection gone.
    for (const socket of this.#sockets) socket.destroy();
    this.#server?.close();
    this.#server = undefined;
  }

  /** Listens again on the same port (a restarted control plane). */
  async comeBack(): Promise<void> {
    await this.#listen(Number(new URL(this.url).port));
  }

  async #listen(port = 0): Promise<void> {
    const connect = connectNodeAdapter({ routes: this.#routes });
    // As the agent port's gate does: a call without a bearer (the exchange aside) is refused
    // before its body is read, so it never reaches a handler (nor `calls`).
    const server = http2.createServer((req, res) => {
      const exchange = req.url.endsWith(`/${AgentService.method.exchangeToken.name}`);
      if (req.headers['authorization'] || exchange) {
        connect(req, res);
        return;
      }
      this.anonymousRefused.push(req.url.slice(req.url.lastIndexOf('/') + 1));
      res.writeHead(200, { 'content-type': 'application/grpc+proto' });
      res.addTrailers({ 'grpc-status': String(Code.Unauthenticated), 'grpc-message': 'no bearer' });
      res.end();
    });
    server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    server.on('session', (session) => {
      this.#sessions.add(session);
      this.sessionsOpened++;
      session.on('close', () => this.#sessions.delete(session));
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.#server = server;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    for (const s of this.#sessions) s.destroy();
    await new Promise<void>((resolve) =>
      this.#server ? this.#server.close(() => resolve()) : resolve(),
    );
  }
}
