/**
 * The agent ↔ control-plane protocol version: one integer, bumped when a change to the agent
 * RPC (messages, their meaning, or the call sequence) means an agent and a server of different
 * builds could misunderstand each other. A change protobuf already keeps compatible (a new
 * optional field both sides may ignore) does not bump it.
 *
 * The agent states it at Register (`RegisterRequest.protocol_version`); the server refuses a
 * version outside the range it supports (docs/agent.md, "Compatibility").
 */
export const AGENT_PROTOCOL_VERSION = 1;

/** The inclusive range of agent protocol versions a server accepts. */
export interface AgentProtocolRange {
  min: number;
  max: number;
}

/**
 * What this build's server accepts: its own version and the one before it (once there is one),
 * so a rolling upgrade (control plane first, agents follow with the next attempts) never strands
 * a running attempt. An agent newer than the server is refused: the server cannot know what a
 * future agent expects of it.
 */
export const SUPPORTED_AGENT_PROTOCOLS: AgentProtocolRange = {
  min: Math.max(1, AGENT_PROTOCOL_VERSION - 1),
  max: AGENT_PROTOCOL_VERSION,
};

export type AgentProtocolVerdict =
  | { compatible: true; version: number }
  | { compatible: false; version: number; reason: 'agent_too_old' | 'agent_too_new' };

/**
 * The range rule. `stated` is the field as received: 0 (protobuf's default) is an agent built
 * before the field existed, which spoke protocol 1.
 */
export function checkAgentProtocol(
  stated: number,
  supported: AgentProtocolRange = SUPPORTED_AGENT_PROTOCOLS,
): AgentProtocolVerdict {
  const version = stated === 0 ? 1 : stated;
  if (version < supported.min) return { compatible: false, version, reason: 'agent_too_old' };
  if (version > supported.max) return { compatible: false, version, reason: 'agent_too_new' };
  return { compatible: true, version };
}

/** The refusal's text: both versions and what to do, for the agent's log and the server's. */
export function agentProtocolRefusal(
  verdict: Extract<AgentProtocolVerdict, { compatible: false }>,
  supported: AgentProtocolRange = SUPPORTED_AGENT_PROTOCOLS,
  agentVersion = '',
): string {
  const range =
    supported.min === supported.max
      ? `protocol ${supported.max}`
      : `protocols ${supported.min}-${supported.max}`;
  const agent = agentVersion === '' ? 'the agent' : `agent ${agentVersion}`;
  const fix =
    verdict.reason === 'agent_too_old'
      ? "upgrade the agent (its image or package) to the control plane's release"
      : 'upgrade the control plane first, then the agents';
  return (
    `LF_AGENT_PROTOCOL_INCOMPATIBLE: ${agent} speaks agent protocol ${verdict.version}, this ` +
    `control plane accepts ${range}; ${fix} (docs/agent.md, "Compatibility").`
  );
}

/**
 * The response metadata key (a trailer on a stream) under which the control plane names the
 * stable `LF_` code of a refusal an agent must act on, so the agent decides by the code and
 * never by the message text.
 */
export const ERROR_CODE_METADATA = 'leoflow-error-code';

/**
 * The code a replica that does not hold the scheduling lease answers a warm worker's
 * AwaitAssignment with (under ERROR_CODE_METADATA): the worker reconnects on a new connection
 * instead of counting a failure.
 */
export const WARM_WORKER_NOT_LEADER_CODE = 'LF_WARM_WORKER_NOT_LEADER';

/**
 * What a warm-pool worker writes to its container's termination log when something of an
 * attempt survived its end (a process, its work dir): the pod takes no more work and exits. The
 * pool manager looks for this text in the listed pod's termination message and records the
 * recycle as `survivor` (any other ended pod is `gone`). One constant for the writer and the
 * reader, so the two cannot drift apart.
 */
export const WARM_WORKER_RECYCLE_MESSAGE = 'recycle: a process of the previous attempt survived';
