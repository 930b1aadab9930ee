/**
 * What a `leoflow server` replica does. `api` serves the REST API, the web app and the agent
 * RPC and never schedules; `scheduler` contends for the scheduler lease and serves only the
 * agent RPC and its probes; `all` does both.
 */
export type ServerRole = 'all' | 'api' | 'scheduler';

export const SERVER_ROLES: readonly ServerRole[] = ['all', 'api', 'scheduler'];

/** The scheduler lease's timings (docs/pro.md, "Scheduler leadership"). */
export interface LeaseTimings {
  /** how long a grant lasts in the database */
  ttlMs: number;
  /** how often the leader renews and a follower tries to acquire */
  renewIntervalMs: number;
  /** how much sooner than its grant the leader stops acting on it */
  safetyMarginMs: number;
}

/** Pro's own settings; a ServerConfig without them is Lite. */
export interface ProServerConfig {
  role: ServerRole;
  lease: LeaseTimings;
  /** SIGTERM: how long the replica may take to stop taking work and finish what it serves */
  drainGraceMs: number;
  /**
   * Where the agent and user signing keyrings live: one directory every replica shares (a
   * mounted volume or Secret), so a token one replica signs verifies on all of them.
   */
  keysDir: string;
}

/** Takeover after a leader dies without releasing: at most ttl + renew interval (20 s). */
export const DEFAULT_LEASE_TIMINGS: LeaseTimings = {
  ttlMs: 15_000,
  renewIntervalMs: 5_000,
  safetyMarginMs: 3_000,
};

/** Kubernetes' default terminationGracePeriodSeconds is 30 s; the drain finishes inside it. */
export const DEFAULT_DRAIN_GRACE_MS = 25_000;
