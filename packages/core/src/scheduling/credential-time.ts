import { ConfigError } from '../errors/leoflow-error.js';

/** 10 min; also the shortest projected service-account token Kubernetes will issue. */
export const AGENT_TOKEN_TTL_FLOOR_SECONDS = 600;

/**
 * Lifetime of a per-attempt agent token: max(10 min, 4 × heartbeat interval). Renewal rides
 * on heartbeats, so four intervals means three consecutive lost heartbeats still leave a valid
 * token. With a short interval the floor dominates, so a few seconds of network trouble
 * never outlives a token.
 */
export function agentTokenTtlSeconds(heartbeatIntervalSeconds: number): number {
  if (!Number.isFinite(heartbeatIntervalSeconds) || heartbeatIntervalSeconds <= 0) {
    throw new ConfigError(
      'LF_CONFIG_INVALID',
      `execution.heartbeat_interval must be a positive duration, got ${String(heartbeatIntervalSeconds)}s; ` +
        'set it to e.g. 15s.',
      { key: 'execution.heartbeat_interval' },
    );
  }
  return Math.max(AGENT_TOKEN_TTL_FLOOR_SECONDS, 4 * heartbeatIntervalSeconds);
}

/**
 * After gaining scheduler leadership no attempt is reaped for this long: two agent-lost
 * thresholds, so every live agent has had a full threshold to reach the new leader.
 */
export function settlingGraceSeconds(agentLostThresholdSeconds: number): number {
  return 2 * agentLostThresholdSeconds;
}

export interface TimingLadderConfig {
  heartbeatIntervalSeconds: number;
  agentLostThresholdSeconds: number;
  /** the per-attempt token TTL, normally agentTokenTtlSeconds(heartbeatIntervalSeconds) */
  tokenTtlSeconds: number;
  /** auth.max_attempt_credential_lifetime; ≤ 0 disables the ceiling */
  maxAttemptCredentialLifetimeSeconds: number;
  /**
   * When given, also checks agent-lost < grace < token TTL (DESIGN §4's full ladder); normally
   * settlingGraceSeconds(agentLostThresholdSeconds).
   */
  settlingGraceSeconds?: number;
}

export interface LadderViolation {
  /** the config key to change */
  key: string;
  message: string;
}

/**
 * The resilience ladder: heartbeat < agent-lost < [settling grace <] token TTL < ceiling.
 * Each rung must clear the one below, or a healthy attempt is reaped, or loses its token,
 * before the mechanism meant to keep it alive can act. Returns every broken rung (empty =
 * valid) so boot can print them all at once, each naming the key to change.
 */
export function validateTimingLadder(cfg: TimingLadderConfig): LadderViolation[] {
  const hb = cfg.heartbeatIntervalSeconds;
  const lost = cfg.agentLostThresholdSeconds;
  const ttl = cfg.tokenTtlSeconds;
  const ceiling = cfg.maxAttemptCredentialLifetimeSeconds;
  const grace = cfg.settlingGraceSeconds;
  const out: LadderViolation[] = [];

  if (!Number.isFinite(hb) || hb <= 0) {
    out.push({
      key: 'execution.heartbeat_interval',
      message: `execution.heartbeat_interval is ${fmt(hb)}; set it to a positive duration such as 15s.`,
    });
  }
  if (!Number.isFinite(lost) || lost <= 0) {
    out.push({
      key: 'execution.agent_lost_threshold',
      message: `execution.agent_lost_threshold is ${fmt(lost)}; set it to a positive duration such as 90s.`,
    });
  } else if (Number.isFinite(hb) && hb > 0 && !(hb < lost)) {
    out.push({
      key: 'execution.agent_lost_threshold',
      message:
        `execution.agent_lost_threshold (${fmt(lost)}) must be greater than ` +
        `execution.heartbeat_interval (${fmt(hb)}), or every attempt is reaped between two ` +
        `heartbeats; set it to ${suggestLost(hb, ttl)}.`,
    });
  }

  if (grace !== undefined && Number.isFinite(lost) && lost > 0) {
    if (!(lost < grace)) {
      out.push({
        key: 'execution.agent_lost_threshold',
        message:
          `the settling grace (${fmt(grace)}) must be greater than execution.agent_lost_threshold ` +
          `(${fmt(lost)}); lower execution.agent_lost_threshold below ${fmt(grace)}.`,
      });
    } else if (!(grace < ttl)) {
      out.push({
        key: 'execution.agent_lost_threshold',
        message:
          `the settling grace (${fmt(grace)} = 2 × execution.agent_lost_threshold) must be below ` +
          `the per-attempt token TTL (${fmt(ttl)}), or tokens of live attempts expire while a new ` +
          `scheduler leader is still settling; set execution.agent_lost_threshold below ${fmt(ttl / 2)}.`,
      });
    }
  }

  if (Number.isFinite(lost) && lost > 0 && !(lost < ttl)) {
    out.push({
      key: 'execution.agent_lost_threshold',
      message:
        `execution.agent_lost_threshold (${fmt(lost)}) must be below the per-attempt token TTL ` +
        `(${fmt(ttl)} = max(600s, 4 × execution.heartbeat_interval)), or a silent agent's token ` +
        `expires before the reaper notices it; set execution.agent_lost_threshold below ${fmt(ttl)}.`,
    });
  }

  if (ceiling > 0 && !(ttl < ceiling)) {
    out.push({
      key: 'auth.max_attempt_credential_lifetime',
      message:
        `auth.max_attempt_credential_lifetime (${fmt(ceiling)}) must be greater than the ` +
        `per-attempt token TTL (${fmt(ttl)}), or no token could ever be renewed; set it above ` +
        `${fmt(ttl)} (default 24h), or to 0 to disable the ceiling.`,
    });
  }
  return out;
}

/** 6 missed beats is the documented tolerance, unless that would reach the token TTL. */
function suggestLost(hb: number, ttl: number): string {
  return 6 * hb < ttl
    ? `about 6 × the interval (${fmt(6 * hb)})`
    : `a value above ${fmt(hb)} and below the token TTL (${fmt(ttl)})`;
}

function fmt(seconds: number): string {
  return `${String(seconds)}s`;
}
