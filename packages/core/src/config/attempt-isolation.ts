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

/**
 * The attempt sandbox (DESIGN §4, Isolation; docs/security.md, "The sandbox"). Operator-scoped
 * execution.* settings; the lead's settings table (issue 32) takes them from here.
 */
export const ISOLATION_KEY = 'execution.isolation';
export const NETWORK_KEY = 'execution.network';
export const WRITABLE_PATHS_KEY = 'execution.writable_paths';
export const TMPFS_SIZE_KEY = 'execution.tmpfs_size';

/**
 * auto: namespaces where the host allows them, else the per-uid fallback (doctor names it);
 * required: refuse to start without namespaces; fallback: per-attempt uids without namespaces.
 */
export type IsolationMode = 'auto' | 'required' | 'fallback';
/** host: the host's network (default); none: an empty network namespace per attempt */
export type NetworkMode = 'host' | 'none';
/** what is in force: namespaces, the per-uid fallback, or nothing of either (not root) */
export type SandboxMode = 'namespaces' | 'uid' | 'none';

export const DEFAULT_ISOLATION_MODE: IsolationMode = 'auto';
export const DEFAULT_NETWORK_MODE: NetworkMode = 'host';
/** each private tmpfs of an attempt (/tmp, /var/tmp, /dev/shm, /run/lock, …): 256 MiB */
export const DEFAULT_SANDBOX_TMPFS_SIZE = 256 * 1024 * 1024;

export function parseIsolationMode(text: string, key = ISOLATION_KEY): IsolationMode {
  const v = text.trim();
  if (v === 'auto' || v === 'required' || v === 'fallback') return v;
  throw new ConfigError(
    'LF_CONFIG_SANDBOX',
    `${key}=${JSON.stringify(text)} is not an isolation mode: auto (default: namespaces where available, else the per-uid fallback), required (refuse to start without namespaces) or fallback (per-attempt uids, no namespaces)`,
  );
}

export function parseNetworkMode(text: string, key = NETWORK_KEY): NetworkMode {
  const v = text.trim();
  if (v === 'host' || v === 'none') return v;
  throw new ConfigError(
    'LF_CONFIG_SANDBOX',
    `${key}=${JSON.stringify(text)} is not a network mode: host (default) or none (an empty network namespace per attempt)`,
  );
}

/** A size in bytes, or with a k/m/g suffix (powers of 1024); at least 1 MiB. */
export function parseTmpfsSize(text: string, key = TMPFS_SIZE_KEY): number {
  const m = /^\s*(\d{1,12})\s*([kKmMgG]i?[bB]?)?\s*$/.exec(text);
  const unit = m?.[2]?.[0]?.toLowerCase();
  const n = m
    ? Number(m[1]) * (unit === 'k' ? 1024 : unit === 'm' ? 1024 ** 2 : unit === 'g' ? 1024 ** 3 : 1)
    : NaN;
  if (!Number.isSafeInteger(n) || n < 1024 * 1024) {
    throw new ConfigError(
      'LF_CONFIG_SANDBOX',
      `${key}=${JSON.stringify(text)} is not a tmpfs size: write bytes or a size such as 256M or 1G (at least 1M; default 256M)`,
    );
  }
  return n;
}

/**
 * Absolute paths, separated by ':' (env) or given as a list (file, repeated flag). Relative
 * paths, '..' segments and '/' itself are refused: a writable path is bind-mounted read-write.
 */
export function parseWritablePaths(
  value: string | readonly string[],
  key = WRITABLE_PATHS_KEY,
): string[] {
  const items = typeof value === 'string' ? value.split(':') : [...value];
  const out: string[] = [];
  for (const raw of items) {
    const p = raw.trim();
    if (p === '') continue;
    if (!p.startsWith('/') || p === '/' || p.split('/').includes('..') || p.includes('\0')) {
      throw new ConfigError(
        'LF_CONFIG_SANDBOX',
        `${key}: ${JSON.stringify(raw)} is not an absolute path below / without '..' (list the directories tasks may write, e.g. /srv/exports)`,
      );
    }
    const norm = p.replace(/\/+$/, '').replace(/\/{2,}/g, '/');
    if (!out.includes(norm)) out.push(norm);
  }
  return out;
}

/**
 * What attempts still share in a sandbox mode: the start banner, doctor and docs/security.md's
 * table say the same.
 */
export function sandboxExposures(
  mode: SandboxMode,
  network: NetworkMode,
  landlock: boolean,
  helper: boolean,
): string[] {
  const out: string[] = [];
  if (mode === 'none') {
    out.push(
      "not root: no per-attempt uids and no namespaces — every attempt runs as the control plane's user, so it can read the data dir (keys, admin token, database) and other attempts' /proc entries and files, and attempts share /tmp and the other world-writable dirs",
    );
  }
  if (mode === 'uid') {
    out.push(
      "no namespaces (per-uid fallback): while they run, attempts share /tmp, /var/tmp, /dev/shm, /run/lock and every other world-writable dir (swept as the uid at release), System V IPC and POSIX shm, and the host's /proc (other uids' processes are listed, not readable); the rest of the filesystem is as writable as the uid's permissions allow",
    );
  }
  if (network === 'host') {
    out.push(
      `host network: loopback listeners${landlock ? '' : ' and abstract unix sockets'} are reachable between attempts and from an attempt to the host's services (execution.network none gives each attempt an empty network namespace)`,
    );
  }
  if (!helper) {
    out.push(
      'no sandbox helper (packages/agent/dist/leoflow-sandbox was not built: no C compiler): no namespaces, no no_new_privs, no fresh session keyring, no Landlock; install gcc and libc6-dev and run npm run build',
    );
  } else if (!landlock) {
    out.push(
      'no Landlock scoping (the kernel has Landlock ABI < 6): abstract unix sockets are shared under the host network, and signals are bounded by uids only',
    );
  }
  return out;
}
