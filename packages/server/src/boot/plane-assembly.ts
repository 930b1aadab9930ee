import type { Clock, SecretLivenessMode, SecretScopingMode } from '@leoflow/core';
import type { Logger } from 'pino';
import { AgentTokenIssuer } from '../auth/agent-token.js';
import type { SigningKey, SigningKeyring } from '../auth/signing-keys.js';
import { CachingAgentTokenVerifier } from '../auth/token-cache.js';
import type { WorkerTokenClaims, WorkerTokenVerification } from '../auth/worker-token.js';
import { AttemptRecorder } from '../attempts/attempt-record.js';
import { SessionBindings } from '../attempts/session-binding.js';
import { OutputMasking } from '../attempts/output-masking.js';
import { SecretDelivery, type SecretMetrics } from '../attempts/secret-delivery.js';
import type { Executors } from '../executor/executors.js';
import { SoleLeadership, type Leadership } from '../scheduler/leadership/leadership.js';
import { createAgentAuthentication, type AgentAuthentication } from '../rpc/agent-auth.js';
import type { AgentProtocolRange } from '@leoflow/protocol';
import { createAgentService } from '../rpc/agent-service/agent-service.js';
import { type AgentServiceDeps } from '../rpc/agent-service/deps.js';
import {
  createAttemptRegistration,
  type RegistrationPath,
} from '../attempts/attempt-registration.js';
import type { HandOffRegistration } from '../attempts/attempt-launch.js';
import type { LogLimits } from '../config/log-limits.js';
import type { AgentChannelMode } from '../rpc/agent-server.js';
import {
  createTokenExchange,
  type TokenExchangeDeps,
} from '../executor/kubernetes/exchange/token-exchange.js';
import { AttemptLifecycle } from '../attempts/attempt-lifecycle.js';
import { RunOperations } from '../scheduler/run-operations.js';
import { Scheduler, type SchedulerTimings } from '../scheduler/scheduler.js';
import { SpecCache } from '../store/spec-cache.js';
import type { RunnerTokenSealStore } from '../store/ports/runner-token-seals.js';
import type { Store } from '../store/store.js';
import type { FaultInjector } from '../util/test-faults.js';
import type { Keyring } from '../vault/keyring.js';
import { VaultService, type UnreadableValue } from '../vault/vault-service.js';

/** What the parts are built from: the I/O-owning pieces a caller has already opened or loaded. */
export interface PlaneInputs {
  /**
   * The verified-token cache to use; a new one when absent (the control plane). The benchmarks
   * build several agent services behind one agent-port gate and pass the gate's, so a renewed
   * token each service remembers is in the cache the gate reads.
   */
  verifier?: CachingAgentTokenVerifier;
  store: Store;
  clock: Clock;
  logger: Logger;
  /** the agent signing keyring (a bare key cannot rotate: tests only) */
  agentKeys: SigningKeyring | SigningKey;
  /** per-attempt token TTL, agentTokenTtlSeconds(heartbeat) in production */
  agentTokenTtlSeconds: number;
  vaultKeyring: Keyring;
  onVaultUnreadable?: (v: UnreadableValue) => void;
  /** a value needs a key id the vault keyring lacks: reload it (VaultKeyringReloader) */
  onVaultUnknownKey?: (keyIds: string[]) => Promise<void>;
  /**
   * the directory's runner tokens, sealed by the vault keyring: key rotation re-encrypts and
   * counts them (VaultServiceOptions.runnerTokens); the control plane passes its directory
   */
  runnerTokens?: RunnerTokenSealStore;
  /** the configured executors; dispatch uses their default */
  executors: Executors;
  /** the URL agents dial (the agent port is bound before the plane is assembled) */
  agentUrl: string;
  timings: SchedulerTimings;
  credentials: {
    scoping: SecretScopingMode;
    liveness: SecretLivenessMode;
    /** renewal ceiling of an attempt's credential; 0 or less disables it */
    maxCredentialLifetimeMs: number;
  };
  /** false when the agent channel is cleartext on a non-loopback address (no secrets then) */
  channelSecure: boolean;
  /** the per-try delivery record; true unless a benchmark measures what it costs */
  recordAttempts?: boolean;
  metrics?: SecretMetrics & {
    renewal(outcome: 'renewed' | 'ceiling_stopped'): void;
    registration?(via: RegistrationPath, outcome: 'registered' | 'terminate'): void;
  };
  logLimits?: LogLimits;
  faults?: FaultInjector;
  /** who may schedule: Pro's lease elector; Lite's SoleLeadership when absent */
  leadership?: Leadership;
  /** agent protocol versions Register accepts; this build's SUPPORTED_AGENT_PROTOCOLS when absent */
  agentProtocols?: AgentProtocolRange;
  /** AwaitAssignment and AckAssignment (rpc/assignment-rpc.ts); Unimplemented when absent */
  assignments?: AgentServiceDeps['assignments'];
  /**
   * auth.agent_token_transport=exchange: what the exchange needs beyond the plane's own parts
   * (its apiserver client, where each tenant's pods run, warm pools). Unimplemented when absent.
   */
  exchange?: Omit<TokenExchangeDeps, 'store' | 'tokens' | 'clock' | 'logger'>;
  /** what the agent channel protects (the exchange refuses cleartext non-loopback) */
  channelMode?: AgentChannelMode;
  /** warm pools: the agent port admits worker tokens (Register, AwaitAssignment only) */
  workerVerifier?: WorkerTokenVerification;
  /** warm pools: a worker token's pod still serves its pool (else its token opens nothing) */
  workerServing?: (claims: WorkerTokenClaims) => Promise<boolean>;
}

/** The control plane's parts, wired once; listeners (agent port, REST, metrics) are the caller's. */
export interface PlaneParts {
  tokens: AgentTokenIssuer;
  verifier: CachingAgentTokenVerifier;
  vault: VaultService;
  specs: SpecCache;
  lifecycle: AttemptLifecycle;
  runs: RunOperations;
  records: AttemptRecorder | undefined;
  /** the session keys bound at Register, checked on every later attempt RPC */
  sessions: SessionBindings;
  secrets: SecretDelivery;
  /** the agent RPC service and the agent port's authentication in front of it */
  agentService: ReturnType<typeof createAgentService>;
  agentAuth: AgentAuthentication;
  scheduler: Scheduler;
  /** another scheduler over the same parts, as a restarted control plane would build */
  newScheduler: () => Scheduler;
  /** asks the scheduler for a tick soon (a no-op until the scheduler is started) */
  poke: () => void;
}

/**
 * Builds the control plane's parts from its inputs. The one place they are wired: the control
 * plane, the test harness and the benchmarks all call it, so a wiring change reaches all three.
 * Long on purpose (issue 32 leaves it as one of three): it is a flat list of constructor calls in
 * dependency order, with no branch but optional inputs; split, a reader would chase one wiring
 * across several functions.
 */
export function assemblePlane(input: PlaneInputs): PlaneParts {
  const { store, clock, logger, executors, timings, credentials } = input;
  const leadership = input.leadership ?? new SoleLeadership();
  const tokens = new AgentTokenIssuer(input.agentKeys, input.agentTokenTtlSeconds);
  const verifier = input.verifier ?? new CachingAgentTokenVerifier(tokens);
  const vault = new VaultService(store, input.vaultKeyring, {
    clock,
    ...(input.onVaultUnreadable ? { onUnreadable: input.onVaultUnreadable } : {}),
    ...(input.onVaultUnknownKey ? { onUnknownKey: input.onVaultUnknownKey } : {}),
    ...(input.runnerTokens ? { runnerTokens: input.runnerTokens } : {}),
  });
  // The scheduler does not exist yet when the lifecycle is built; poke reaches it once it does.
  let scheduler: Scheduler | null = null;
  const poke = () => scheduler?.poke();
  const specs = new SpecCache(store);
  const lifecycle = new AttemptLifecycle(store, specs, clock, logger, poke);
  const runs = new RunOperations(store, clock, poke);
  const modes = { scoping: credentials.scoping, liveness: credentials.liveness };
  const records =
    input.recordAttempts === false ? undefined : new AttemptRecorder(store, clock, logger, modes);
  const secrets = new SecretDelivery({
    store,
    vault,
    specs,
    clock,
    logger,
    ...modes,
    channelSecure: input.channelSecure,
    ...(input.metrics ? { metrics: input.metrics } : {}),
    ...(records ? { records } : {}),
  });
  // Always on (never a benchmark's choice): the binding is what makes a copied token worthless.
  const sessions = new SessionBindings({ store, clock, logger });
  const registration = createAttemptRegistration({
    store,
    specs,
    clock,
    lifecycle,
    logger,
    heartbeatIntervalMs: timings.heartbeatIntervalMs,
    secrets,
    sessions,
    evictAttempt: (ti, t) => verifier.evictAttempt(ti, t),
    ...(input.faults ? { faults: input.faults } : {}),
    ...(input.metrics?.registration
      ? { onRegistration: input.metrics.registration.bind(input.metrics) }
      : {}),
  });
  // The subprocess executor's standby agents are registered at hand-off: what their Register
  // would do with the token they are handed, answered on their pipe instead of a round trip.
  const handOff: HandOffRegistration = {
    async register(token, agent) {
      const claims = await verifier.verify(token, clock.now());
      return registration.register(claims, agent, { prefetch: true, wantSpec: false }, 'handoff');
    },
  };
  const agentService = createAgentService({
    registration,
    store,
    specs,
    clock,
    tokens,
    lifecycle,
    logger,
    heartbeatIntervalMs: timings.heartbeatIntervalMs,
    maxCredentialLifetimeMs: credentials.maxCredentialLifetimeMs,
    secrets,
    sessions,
    outputMasking: new OutputMasking({ store, vault, logger }),
    onChange: poke,
    renewedTokens: verifier,
    ...(input.metrics ? { onRenewal: input.metrics.renewal.bind(input.metrics) } : {}),
    ...(input.logLimits ? { logLimits: input.logLimits } : {}),
    ...(input.faults ? { faults: input.faults } : {}),
    ...(records ? { records } : {}),
    ...(input.agentProtocols ? { agentProtocols: input.agentProtocols } : {}),
    ...(input.assignments ? { assignments: input.assignments } : {}),
    ...(input.exchange
      ? {
          exchange: createTokenExchange({
            ...input.exchange,
            store,
            attemptRecords: store,
            tokens,
            clock,
            logger,
          }),
        }
      : {}),
    ...(input.channelMode ? { channelMode: input.channelMode } : {}),
  });
  const agentAuth = createAgentAuthentication({
    verifier,
    clock,
    sessions,
    ...(input.workerVerifier ? { workerVerifier: input.workerVerifier } : {}),
    ...(input.workerServing ? { workerServing: input.workerServing } : {}),
  });
  const newScheduler = () =>
    new Scheduler({
      store,
      specs,
      clock,
      executors,
      tokens,
      lifecycle,
      logger,
      agentUrl: input.agentUrl,
      timings,
      leadership,
      handOff,
      ...(input.faults ? { faults: input.faults } : {}),
    });
  scheduler = newScheduler();
  // A replica that has just been elected schedules at once, not at its next tick.
  leadership.onChange((leading) => {
    if (leading) poke();
  });
  executors.onAgentExit((exit) => {
    lifecycle
      .agentExited(exit)
      .catch((err: unknown) => logger.error({ err }, 'agent exit bookkeeping failed'));
  });
  return {
    tokens,
    verifier,
    vault,
    specs,
    lifecycle,
    runs,
    records,
    sessions,
    secrets,
    agentService,
    agentAuth,
    scheduler,
    newScheduler,
    poke,
  };
}
