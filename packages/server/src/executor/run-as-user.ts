import { readFileSync } from 'node:fs';
import { LeoflowError } from '@leoflow/core';

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
  throw new LeoflowError(
    'LF_CONFIG_RUN_AS_USER',
    `execution.run_as_user names "${user}", which is not an account on this machine; create it ` +
      `(useradd --system ${user}) or set LEOFLOW_EXECUTION_RUN_AS_USER to an existing unprivileged user`,
  );
}
