import type { TaskSpecDef } from '@leoflow/core';
import type { RegisterResponse, TaskSpec } from '@leoflow/protocol';
import type { AttemptIdentity } from '../auth/agent-token.js';
import type { RegisteringAgent } from './attempt-registration.js';

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
