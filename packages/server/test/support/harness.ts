import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createClient,
  createRouterTransport,
  type Client,
  type Transport,
} from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  DEFAULT_CREDENTIAL_PLANE_CONFIG,
  ManualClock,
  type SecretLivenessMode,
  type SecretScopingMode,
} from '@leoflow/core';
import pg from 'pg';
import { AgentService, type AgentProtocolRange } from '@leoflow/protocol';
import { pino } from 'pino';
import { loadOrCreateSigningKey } from '../../src/auth/signing-keys.js';
import type { Executor, StartedAgent } from '../../src/executor/executor.js';
import type { AttemptLaunch } from '../../src/attempts/attempt-launch.js';
import type { AgentExit } from '../../src/attempts/attempt-lifecycle.js';
import { startAgentRpcServer, type AgentRpcServer } from '../../src/rpc/agent-server.js';
import type { LogLimits } from '../../src/config/log-limits.js';
import { Keyring } from '../../src/vault/keyring.js';
import { postgresTestUrl } from './databases.js';
import type { AgentTokenIssuer } from '../../src/auth/agent-token.js';
import type { CachingAgentTokenVerifier } from '../../src/auth/token-cache.js';
import type { AttemptRecorder } from '../../src/attempts/attempt-record.js';
import type { SessionBindings } from '../../src/attempts/session-binding.js';
import { Executors } from '../../src/executor/executors.js';
import type { Leadership } from '../../src/scheduler/leadership/leadership.js';
import { assemblePlane, type PlaneParts } from '../../src/boot/plane-assembly.js';
import { AssignmentBroker } from '../../src/executor/assignments/assignment-broker.js';
import { requeueFence } from '../../src/executor/assignments/requeue-fence.js';
import { createAssignmentHandlers, type AssignmentRpcDeps } from '../../src/rpc/assignment-rpc.js';
import { RunnerExecutor } from '../../src/executor/runner-executor.js';
import type { RunOperations } from '../../src/scheduler/run-operations.js';
import type { Scheduler, SchedulerTimings } from '../../src/scheduler/scheduler.js';
import type { VaultService } from '../../src/vault/vault-service.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/store.js';

/** The session key the harness's "agent" binds when a test's Register names none. */
export const HARNESS_SESSION_KEY = 'harness-agent-session';

/** `<task instance>#<try>` from an attempt token's claims (unverified: routing only). */
function attemptOfToken(token: string): string | undefined {
  try {
    const p = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
      ti?: unknown;
      try?: unknown;
    };
    return typeof p.ti === 'string' ? `${p.ti}#${String(p.try)}` : undefined;
  } catch {
    return undefined;
  }
}

/** A launch as the recording executor saw it, with the credential it minted at start. */
export type RecordedLaunch = AttemptLaunch & { token: string };

/**
 * Records launches instead of starting processes; tests play the agent through the RPC. It mints
 * the attempt's credential at start, as the subprocess executor does.
 */
export class RecordingExecutor implements Executor {
  constructor(readonly name = 'recording') {}
  readonly posture = { tokenTransport: 'recorded by the test executor' };
  readonly launches: RecordedLaunch[] = [];
  readonly terminated: string[] = [];
  private readonly listeners: ((e: AgentExit) => void)[] = [];
  async start(launch: AttemptLaunch): Promise<StartedAgent | void> {
    this.launches.push({ ...launch, token: await launch.credential.mint() });
  }
  terminate(tiId: string, tryNumber: number): Promise<void> {
    this.terminated.push(`${tiId}#${tryNumber}`);
    return Promise.resolve();
  }
  onAgentExit(l: (e: AgentExit) => void): void {
    this.listeners.push(l);
  }
  running(): number {
    return 0;
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
  take(): RecordedLaunch[] {
    return this.launches.splice(0);
  }
}

export const T0 = Date.parse('2026-08-20T12:00:00Z');

export const FAST_TIMINGS: SchedulerTimings = {
  tickMs: 50,
  heartbeatIntervalMs: 15_000,
  agentLostThresholdMs: 90_000,
  dispatchLostThresholdMs: 180_000,
  timeoutGraceMs: 30_000,
  settlingGraceMs: 0,
};

export interface HarnessOptions {
  timings?: SchedulerTimings;
  scoping?: SecretScopingMode;
  liveness?: SecretLivenessMode;
  /** 'memory' = in-process router transport; 'http2' = the real agent RPC server over h2c */
  rpc?: 'memory' | 'http2';
  dialect?: 'sqlite' | 'postgres';
  ceilingMs?: number;
  /** PushLogs caps (DEFAULT_LOG_LIMITS when absent) */
  logLimits?: LogLimits;
  /** executors configured beside the recording one (which stays the default) */
  moreExecutors?: Executor[];
  /** with rpc 'http2': observes every chunk the agent port's gzip decoder produces */
  onInflate?: (bytes: number) => void;
  /** who may schedule (Lite's SoleLeadership when absent) */
  leadership?: Leadership;
  /** agent protocol versions Register accepts (this build's range when absent) */
  agentProtocols?: AgentProtocolRange;
  /**
   * Runners: an assignment broker on the harness clock, the runner executor (`runner`, reconciled
   * by the test) and AwaitAssignment/AckAssignment, with these runner records.
   */
  runners?: AssignmentRpcDeps['runnerById'];
}

export interface Harness {
  dir: string;
  store: Store;
  vault: VaultService;
  verifier: CachingAgentTokenVerifier;
  clock: ManualClock;
  executor: RecordingExecutor;
  executors: Executors;
  scheduler: Scheduler;
  runs: RunOperations;
  tokens: AgentTokenIssuer;
  records: AttemptRecorder;
  /** the session keys bound at Register (a test may bind one as an agent's Register would) */
  sessions: SessionBindings;
  /**
   * An agent client; `session` is sent as the leoflow-session header (the agent's key). When a
   * test names none, the key its attempt's Register bound is sent (HARNESS_SESSION_KEY before
   * any Register); `''` sends none.
   */
  agent(token: string, session?: string): Client<typeof AgentService>;
  /** the real agent RPC server's port (rpc 'http2' only) */
  agentPort: number | null;
  /** a second scheduler on the same store, as after a control-plane restart */
  restart(): Scheduler;
  /** the agent service and its authentication, for a test that serves them itself */
  agentService: PlaneParts['agentService'];
  agentAuth: PlaneParts['agentAuth'];
  /** with `runners` */
  broker: AssignmentBroker | null;
  runnerExecutor: RunnerExecutor | null;
  close(): Promise<void>;
}

export async function createHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const timings = opts.timings ?? FAST_TIMINGS;
  const dir = mkdtempSync(join(tmpdir(), 'leoflow-sched-'));
  const pgSchema = `lf_harness_${process.pid}_${randomBytes(4).toString('hex')}`;
  const store =
    opts.dialect === 'postgres'
      ? await openStore({ kind: 'postgres', url: postgresTestUrl(), schema: pgSchema })
      : await openStore({ kind: 'sqlite', file: join(dir, 'leoflow.db') });
  await store.migrate();
  const clock = new ManualClock(T0);
  await store.ensureTenant('default', 'default', clock.now());
  const logger = pino({ level: 'silent' });
  const key = await loadOrCreateSigningKey(dir, 'agent');
  const executor = new RecordingExecutor();
  const broker = opts.runners
    ? new AssignmentBroker(clock, { refence: requeueFence(store, clock) })
    : null;
  const runnerExecutor = broker
    ? new RunnerExecutor({ broker, store, reconcileIntervalMs: 0 })
    : null;
  const executors = new Executors([
    executor,
    ...(opts.moreExecutors ?? []),
    ...(runnerExecutor ? [runnerExecutor] : []),
  ]);
  const parts = assemblePlane({
    store,
    clock,
    logger,
    agentKeys: key,
    agentTokenTtlSeconds: 600,
    vaultKeyring: new Keyring({ id: 'k-test', key: randomBytes(32) }),
    executors,
    agentUrl: 'http://agent.invalid',
    timings,
    credentials: {
      // the product's defaults (enforce, enforce) unless a test names its mode
      scoping: opts.scoping ?? DEFAULT_CREDENTIAL_PLANE_CONFIG.secretScoping,
      liveness: opts.liveness ?? DEFAULT_CREDENTIAL_PLANE_CONFIG.secretLivenessMode,
      maxCredentialLifetimeMs: opts.ceilingMs ?? 24 * 3600_000,
    },
    channelSecure: true,
    ...(opts.logLimits ? { logLimits: opts.logLimits } : {}),
    ...(opts.leadership ? { leadership: opts.leadership } : {}),
    ...(opts.agentProtocols ? { agentProtocols: opts.agentProtocols } : {}),
    ...(broker && opts.runners
      ? {
          assignments: createAssignmentHandlers({
            broker,
            runnerById: opts.runners,
            store,
            clock,
          }),
        }
      : {}),
  });
  const { tokens, verifier, vault, runs, agentService: service, agentAuth: auth } = parts;
  const records = parts.records!;
  let server: AgentRpcServer | null = null;
  let transportFor: (token: string, session?: string) => Transport;
  // Plays the agent's session key as a real agent does (issue 34): the key a Register carries
  // (its body's, else HARNESS_SESSION_KEY) is remembered per attempt and sent with every later
  // call made with a token of that attempt, unless the test names a `session` itself (a copy
  // with no key is `''`, another agent's key any other string).
  const boundKeys = new Map<string, string>();
  const bearer = (token: string, session?: string) => [
    (
        next: Parameters<
          NonNullable<Parameters<typeof createGrpcTransport>[0]['interceptors']>[number]
        >[0],
      ) =>
      (req: Parameters<typeof next>[0]) => {
        req.header.set('authorization', `Bearer ${token}`);
        const attempt = attemptOfToken(token);
        let key = session;
        if (req.method.name === 'Register' && !req.stream) {
          const body = (req.message as { sessionKey?: string }).sessionKey ?? '';
          key ??= body !== '' ? body : HARNESS_SESSION_KEY;
          if (attempt && key !== '' && !boundKeys.has(attempt))
            boundKeys.set(attempt, body !== '' ? body : key);
        }
        key ??= (attempt && boundKeys.get(attempt)) ?? HARNESS_SESSION_KEY;
        if (key !== '') req.header.set('leoflow-session', key);
        return next(req);
      },
  ];
  if (opts.rpc === 'http2') {
    const started = await startAgentRpcServer({
      impl: service,
      host: '127.0.0.1',
      port: 0,
      auth,
      ...(opts.onInflate ? { onInflate: opts.onInflate } : {}),
    });
    server = started;
    transportFor = (token, session) =>
      createGrpcTransport({
        baseUrl: `http://127.0.0.1:${started.port}`,
        interceptors: bearer(token, session),
      });
  } else {
    transportFor = (token, session) =>
      createRouterTransport((router) => router.service(AgentService, service), {
        transport: { interceptors: bearer(token, session) },
        router: { interceptors: [auth.interceptor] },
      });
  }
  return {
    dir,
    store,
    clock,
    executor,
    executors,
    scheduler: parts.scheduler,
    runs,
    tokens,
    vault,
    verifier,
    records,
    sessions: parts.sessions,
    agent: (token, session) => createClient(AgentService, transportFor(token, session)),
    agentPort: server?.port ?? null,
    restart: parts.newScheduler,
    agentService: service,
    agentAuth: auth,
    broker,
    runnerExecutor,
    async close() {
      await server?.close();
      await store.close();
      if (opts.dialect === 'postgres') {
        const c = new pg.Client({ connectionString: postgresTestUrl() });
        await c.connect();
        await c.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`);
        await c.end();
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export { spec, task } from './spec-builders.js';
