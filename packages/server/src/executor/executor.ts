import type { AttemptLaunch } from '../attempts/attempt-launch.js';
import type { AgentExit } from '../attempts/attempt-lifecycle.js';

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
