import { readFileSync } from 'node:fs';
import {
  parseUidRange,
  uidRangeCollisionMessage,
  uidRangeCollisions,
  type UidRange,
  ConfigError,
} from '@leoflow/core';

export interface RunAs {
  user: string;
  uid: number;
  gid: number;
}

/**
 * Resolves the unprivileged account attempts run as when the control plane is root.
 * Returns null when privileges cannot (not root) or should not (disabled) be dropped; callers
 * surface that residual exposure (task code can read the data directory) in doctor and docs.
 */
export function resolveRunAs(user: string | null, passwdFile = '/etc/passwd'): RunAs | null {
  if (user === null || user === '') return null;
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return null;
  const numeric = /^(\d+)(?::(\d+))?$/.exec(user);
  if (numeric) {
    const uid = Number(numeric[1]);
    return { user, uid, gid: numeric[2] === undefined ? uid : Number(numeric[2]) };
  }
  for (const line of readFileSync(passwdFile, 'utf8').split('\n')) {
    const f = line.split(':');
    if (f[0] === user && f[2] !== undefined && f[3] !== undefined) {
      return { user, uid: Number(f[2]), gid: Number(f[3]) };
    }
  }
  throw new ConfigError(
    'LF_CONFIG_RUN_AS_USER',
    `execution.run_as_user names "${user}", which is not an account on this machine; create it ` +
      `(useradd --system ${user}) or set LEOFLOW_EXECUTION_RUN_AS_USER to an existing unprivileged user`,
  );
}

/** How attempts are kept apart from each other and from the control plane. */
export type TaskIsolation =
  | { mode: 'per-attempt'; range: UidRange; nprocLimit: number }
  | { mode: 'shared'; runAs: RunAs }
  | { mode: 'none' };

/** The account files a uid range must stay clear of (any may be absent: null). */
export function readAccountFiles(read: (f: string) => string | null = readOrNull): {
  passwd: string | null;
  group: string | null;
  subuid: string | null;
  subgid: string | null;
} {
  return {
    passwd: read('/etc/passwd'),
    group: read('/etc/group'),
    subuid: read('/etc/subuid'),
    subgid: read('/etc/subgid'),
  };
}

function readOrNull(f: string): string | null {
  try {
    return readFileSync(f, 'utf8');
  } catch {
    return null;
  }
}

/**
 * Root: per-attempt uids from execution.attempt_uid_range (refused at boot when the range
 * overlaps an account, a group or a subordinate id range), or, with the range off, the one
 * shared execution.run_as_user. Not root: nothing to drop to.
 */
export function resolveTaskIsolation(
  execution: {
    attemptUidRange: string | null;
    attemptNprocLimit: number;
    runAsUser: string | null;
  },
  isRoot = typeof process.getuid === 'function' && process.getuid() === 0,
): TaskIsolation {
  if (!isRoot) return { mode: 'none' };
  if (execution.attemptUidRange !== null) {
    const range = parseUidRange(execution.attemptUidRange);
    const hits = uidRangeCollisions(range, readAccountFiles());
    if (hits.length > 0)
      throw new ConfigError('LF_CONFIG_ATTEMPT_UID_RANGE', uidRangeCollisionMessage(range, hits));
    return { mode: 'per-attempt', range, nprocLimit: execution.attemptNprocLimit };
  }
  const runAs = resolveRunAs(execution.runAsUser);
  return runAs ? { mode: 'shared', runAs } : { mode: 'none' };
}
