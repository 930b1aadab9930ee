import { ConfigError } from '../errors/leoflow-error.js';

/**
 * Per-attempt uids (DESIGN §4, Isolation): when the agent is root, every attempt runs under its
 * own uid and gid taken from this range. The range must hold no account or group of the
 * machine, so no file and no other process belongs to an attempt's uid.
 */
export const ATTEMPT_UID_RANGE_KEY = 'execution.attempt_uid_range';
export const ATTEMPT_NPROC_LIMIT_KEY = 'execution.attempt_nproc_limit';

/**
 * 0x70000000 + 65,536 ids: above systemd's container range (524288–1879048191) and below
 * 2^31, where tools that treat uid_t as signed misbehave. See docs/configuration.md.
 */
export const DEFAULT_ATTEMPT_UID_RANGE = '1879048192-1879113727';
/** RLIMIT_NPROC of each attempt's uid (processes and threads of that uid); 0 = not applied */
export const DEFAULT_ATTEMPT_NPROC_LIMIT = 4096;

export interface UidRange {
  first: number;
  last: number;
}

const MAX_ID = 2 ** 31 - 2;

/** `first-last` (inclusive) → range; throws LF_CONFIG_ATTEMPT_UID_RANGE naming the key. */
export function parseUidRange(text: string, key = ATTEMPT_UID_RANGE_KEY): UidRange {
  const m = /^\s*(\d{1,10})\s*-\s*(\d{1,10})\s*$/.exec(text);
  const first = m ? Number(m[1]) : NaN;
  const last = m ? Number(m[2]) : NaN;
  if (!m || first < 1000 || last > MAX_ID || last < first) {
    throw new ConfigError(
      'LF_CONFIG_ATTEMPT_UID_RANGE',
      `${key}=${JSON.stringify(text)} is not a uid range: write first-last with 1000 <= first <= last <= ${MAX_ID} (default ${DEFAULT_ATTEMPT_UID_RANGE}), or "off" to run every attempt as execution.run_as_user`,
    );
  }
  return { first, last };
}

export function formatUidRange(r: UidRange): string {
  return `${r.first}-${r.last}`;
}

export interface IdCollision {
  /** which file named the id */
  file: string;
  name: string;
  id: number;
}

/**
 * Accounts and groups (and subordinate id ranges) inside `range`, from the texts of
 * /etc/passwd, /etc/group, /etc/subuid and /etc/subgid (any may be null when absent).
 */
export function uidRangeCollisions(
  range: UidRange,
  files: {
    passwd?: string | null;
    group?: string | null;
    subuid?: string | null;
    subgid?: string | null;
  },
): IdCollision[] {
  const out: IdCollision[] = [];
  const inRange = (id: number) => id >= range.first && id <= range.last;
  const scan = (file: string, text: string | null | undefined, field: number) => {
    for (const line of (text ?? '').split('\n')) {
      const f = line.split(':');
      const id = Number(f[field]);
      if (f[0] && f[field] !== undefined && f[field] !== '' && Number.isInteger(id) && inRange(id))
        out.push({ file, name: f[0], id });
    }
  };
  scan('/etc/passwd', files.passwd, 2);
  scan('/etc/group', files.group, 2);
  // user:start:count — a rootless container of that user maps host ids in this span
  const subScan = (file: string, text: string | null | undefined) => {
    for (const line of (text ?? '').split('\n')) {
      const f = line.split(':');
      const start = Number(f[1]);
      const count = Number(f[2]);
      if (!f[0] || !Number.isInteger(start) || !Number.isInteger(count) || count <= 0) continue;
      if (start <= range.last && start + count - 1 >= range.first)
        out.push({ file, name: f[0], id: Math.max(start, range.first) });
    }
  };
  subScan('/etc/subuid', files.subuid);
  subScan('/etc/subgid', files.subgid);
  return out;
}

/** The boot/doctor message for a range that collides with the machine's accounts. */
export function uidRangeCollisionMessage(range: UidRange, hits: IdCollision[]): string {
  const shown = hits
    .slice(0, 3)
    .map((h) => `${h.name} (${h.id}) in ${h.file}`)
    .join(', ');
  return (
    `${ATTEMPT_UID_RANGE_KEY}=${formatUidRange(range)} overlaps ${shown}${hits.length > 3 ? ` and ${hits.length - 3} more` : ''}: ` +
    'an attempt could run as that account and read or signal its processes and files; choose a range no account, group or subordinate id range uses ' +
    '(set --attempt-uid-range / LEOFLOW_EXECUTION_ATTEMPT_UID_RANGE; see "Reserving the attempt uid range" in docs/configuration.md)'
  );
}

/** Non-negative whole number; 0 disables. Throws naming the key. */
export function parseNprocLimit(text: string, key = ATTEMPT_NPROC_LIMIT_KEY): number {
  if (!/^\s*\d{1,7}\s*$/.test(text)) {
    throw new ConfigError(
      'LF_CONFIG_ATTEMPT_NPROC_LIMIT',
      `${key}=${JSON.stringify(text)} is not a whole number of processes (default ${DEFAULT_ATTEMPT_NPROC_LIMIT}; 0 does not apply RLIMIT_NPROC)`,
    );
  }
  return Number(text);
}
