import type { ServerConfig } from '../config/server-config.js';
import type { CheckFn, SafeStat } from './facts.js';
import type { CheckStatus, DoctorCheck, DoctorDeps, DoctorOptions, Exposure } from './types.js';

export type ExposeFn = (id: string, sentence: string, remedy: string) => void;

/** What every section receives: the configuration, the machine, and where to put findings. */
export interface SectionContext {
  cfg: ServerConfig;
  deps: DoctorDeps;
  opts: DoctorOptions;
  stat: SafeStat;
  check: CheckFn;
  expose: ExposeFn;
}

/**
 * What the sections find, in the order they find it: checks keep that order in the report;
 * exposures are read by kind (EXPOSURE_ORDER), and in finding order within a kind.
 */
export class Findings {
  readonly checks: DoctorCheck[] = [];
  readonly exposures: Exposure[] = [];

  check = (id: string, status: CheckStatus, message: string): void => {
    this.checks.push({ id, status, message });
  };

  expose = (id: string, sentence: string, remedy: string): void => {
    this.exposures.push({ id, sentence, remedy });
  };

  /** Sorts the exposures in place into reading order (a stable sort) and returns them. */
  sortExposures(): Exposure[] {
    return this.exposures.sort((a, b) => exposureRank(a.id) - exposureRank(b.id));
  }
}

/** Exposures read in this order: what tasks receive, who can read keys, then the network. */
const EXPOSURE_ORDER = [
  'secret_scoping.',
  'secret_liveness.',
  'credential_lifetime.',
  'tasks.',
  'vault_key.',
  'admin_token.',
  'database_url.',
  'agent_channel.',
  'http.',
  'metrics.',
];

function exposureRank(id: string): number {
  const i = EXPOSURE_ORDER.findIndex((prefix) => id.startsWith(prefix));
  return i === -1 ? EXPOSURE_ORDER.length : i;
}
