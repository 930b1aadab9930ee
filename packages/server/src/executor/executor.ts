import type { AttemptIdentity } from '../auth/agent-token.js';

/** Everything an executor needs to start one attempt's agent. */
export interface AttemptLaunch {
  identity: AttemptIdentity;
  /** the attempt's bearer credential; an executor must never put it in env, argv or a file */
  token: string;
  agentUrl: string;
  heartbeatIntervalMs: number;
}

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
  start(launch: AttemptLaunch): Promise<void>;
  /** Stop an attempt's agent if this executor still holds it (the agent kills its task group). */
  terminate(taskInstanceId: string, tryNumber: number): Promise<void>;
  onAgentExit(listener: (exit: AgentExit) => void): void;
  /** number of agents this executor currently holds */
  running(): number;
  /** stop every agent it holds */
  close(): Promise<void>;
}
