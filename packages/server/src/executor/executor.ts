import type { TaskSpecDef } from '@leoflow/core';
import type { TaskSpec } from '@leoflow/protocol';
import type { AttemptIdentity } from '../auth/agent-token.js';
import type { RegisterResponse } from '@leoflow/protocol';
import type { RegisteringAgent } from '../rpc/attempt-registration.js';

/**
 * Where an attempt's credential comes from. The executor mints it when it is ready to hand it
 * over (the subprocess executor right before it writes the pipe; a transport may mint later, or
 * in-band once its agent proves who it is), so the token's lifetime starts at hand-over.
 */
export interface AttemptCredentialSource {
  /**
   * A bearer credential for this attempt, stamped at the time of the call (its iat is now).
   * `fence`: the dispatch generation it carries when it is no longer the claim's (an assignment
   * requeued after its ack deadline was given a new one, so the earlier token is refused).
   */
  mint(fence?: { dispatch_gen: number }): Promise<string>;
}

/** Everything an executor needs to start one attempt's agent. */
export interface AttemptLaunch {
  identity: AttemptIdentity;
  /**
   * An executor puts what this mints only where its token transport says (its posture names
   * it, and doctor the exposure): the subprocess executor in a pipe, never in env, argv or a
   * file; the Kubernetes executor's envvar transport in one env value on the Pod.
   */
  credential: AttemptCredentialSource;
  /** the task's compiled spec (its timeout, executor choices); absent when a test starts one by hand */
  task?: TaskSpecDef;
  /**
   * What GetTaskSpec would answer this attempt's agent, built at dispatch. It carries no secret;
   * an executor whose transport can carry it hands it over with the credential (the subprocess
   * executor: on the pipe), so the agent starts its task without asking. Absent when the task's
   * spec is unknown; the agent then asks GetTaskSpec.
   */
  agentSpec?: TaskSpec;
  agentUrl: string;
  heartbeatIntervalMs: number;
  /**
   * Registers the attempt on behalf of an agent the executor already holds (the subprocess
   * executor's standby agents), so the agent's first call is not Register. Absent: the agent
   * registers itself.
   */
  handOff?: HandOffRegistration;
}

/**
 * An attempt registered by its executor at hand-off: exactly what the Register RPC does for the
 * agent that will hold `token` — the token verified as the agent port's gate verifies it, the
 * fenced queued → running write, the per-try record binding `agent.sessionKey`, then the prefetch
 * under each part's own gate (rpc/attempt-registration.ts). The answer is Register's response,
 * which the executor passes to that agent with the token. Throws when it could not tell (a store
 * blip): the executor then lets the agent register itself.
 */
export interface HandOffRegistration {
  register(token: string, agent: RegisteringAgent): Promise<RegisterResponse>;
}

/** Where a started agent runs, recorded on the claim so a successor can look for it. */
export interface StartedAgent {
  pid?: number;
  hostname?: string;
}

/** A claim (a queued task instance) whose agent has not registered yet, as the store has it. */
export interface PendingClaim {
  task_instance_id: string;
  try_number: number;
  dispatch_gen: number;
  hostname: string | null;
  pid: number | null;
  /** when the claim was made (epoch ms) */
  queued_at: number;
}

/**
 * What the owning executor can tell about a claim's agent. `starting` is an executor still
 * bringing it up (a pod Pending on an image pull, a runner still connecting): the claim is kept
 * up to `until` (epoch ms, the executor's own start timeout), whatever the dispatch-lost
 * threshold says, so a slow start never gets a twin.
 */
export type ClaimProbe =
  | { state: 'alive' }
  | { state: 'gone' }
  | { state: 'unknown' }
  | { state: 'starting'; until: number };

/** What an executor tells the doctor about itself. */
export interface ExecutorPosture {
  /** how an attempt's credential reaches its agent */
  tokenTransport: string;
}

/** What happened to an agent process, for the attempt lifecycle's bookkeeping. */
export interface AgentExit {
  identity: AttemptIdentity;
  exitCode: number | null;
  signal: string | null;
  /** why it ended, when the executor knows better than an exit code (a pod OOM-killed, never pulled) */
  cause?: { code: string; message: string };
}

/**
 * Starts and stops agents. The control plane's record in the store is the truth about an
 * attempt; an executor only owns processes (or pods), so a restart that forgets every handle
 * loses nothing: live agents keep heartbeating and dead ones are found by the reapers. Each
 * claim records the name of the executor that holds it, so terminate, revoke and the reapers
 * reach the right one after a restart.
 */
export interface Executor {
  /** unique among the configured executors; stored on every claim this executor holds */
  readonly name: string;
  readonly posture: ExecutorPosture;
  /** Called once agents can reach the control plane (the agent port listens): pre-start work. */
  warm?(target: { agentUrl: string; heartbeatIntervalMs: number }): void;
  /** Resolves once the agent is started (with where it runs, when the executor knows). */
  start(launch: AttemptLaunch): Promise<StartedAgent | void>;
  /**
   * For a claim whose agent has not registered: is it there, gone, or still starting? Asked
   * after a restart (for a predecessor's claims) and by the dispatch-lost reaper before it fails
   * a claim. Executors that cannot tell may omit it (treated as `unknown`).
   */
  probeClaim?(claim: PendingClaim, now: number): ClaimProbe | Promise<ClaimProbe>;
  /** Stop an attempt's agent if this executor still holds it (the agent kills its task group). */
  terminate(taskInstanceId: string, tryNumber: number): Promise<void>;
  onAgentExit(listener: (exit: AgentExit) => void): void;
  /** number of agents this executor currently holds */
  running(): number;
  /** stop every agent it holds */
  close(): Promise<void>;
  /**
   * Let go of every agent it holds without stopping them (a draining Pro replica: its running
   * attempts go on and report to the other replicas). Executors whose agents cannot outlive
   * them omit it and are closed instead.
   */
  release?(): Promise<void>;
}
