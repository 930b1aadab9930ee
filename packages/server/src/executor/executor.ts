import type { AttemptIdentity } from '../auth/agent-token.js';

/** Everything an executor needs to start one attempt's agent. */
export interface AttemptLaunch {
  identity: AttemptIdentity;
  /** the attempt's bearer credential; an executor must never put it in env, argv or a file */
  token: string;
  agentUrl: string;
  heartbeatIntervalMs: number;
}

/** Where a started agent runs, recorded on the claim so a successor can look for it. */
export interface StartedAgent {
  pid?: number;
  hostname?: string;
}

/** What a successor's executor can tell about an agent a crashed predecessor started. */
export type OrphanProbe = 'alive' | 'gone' | 'unknown';

/** What happened to an agent process, for the scheduler's bookkeeping. */
export interface AgentExit {
  identity: AttemptIdentity;
  exitCode: number | null;
  signal: string | null;
}

/**
 * Starts and stops agents. The control plane's record in the store is the truth about an
 * attempt; an executor only owns processes (or pods), so a restart that forgets every handle
 * loses nothing: live agents keep heartbeating and dead ones are found by the reapers.
 */
export interface Executor {
  readonly name: string;
  /** Resolves once the agent is started (with where it runs, when the executor knows). */
  start(launch: AttemptLaunch): Promise<StartedAgent | void>;
  /**
   * After a restart, for a claim this process did not make: is the agent recorded on it (where
   * `start` said it runs) still there? `gone` lets the claim go back to `scheduled` at once;
   * `alive` and `unknown` wait for it to register, up to the dispatch-lost threshold. Executors
   * that cannot tell may omit this (treated as `unknown`).
   */
  probeOrphan?(agent: { hostname: string | null; pid: number | null }): OrphanProbe;
  /** Stop an attempt's agent if this executor still holds it (the agent kills its task group). */
  terminate(taskInstanceId: string, tryNumber: number): Promise<void>;
  onAgentExit(listener: (exit: AgentExit) => void): void;
  /** number of agents this executor currently holds */
  running(): number;
  /** stop every agent it holds */
  close(): Promise<void>;
}
