import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants as fsc } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  ConfigError,
  sandboxExposures,
  type IsolationMode,
  type NetworkMode,
  type SandboxMode,
} from '@leoflow/core';

/**
 * The attempt sandbox as this control plane runs it (docs/security.md, "The sandbox"): probed
 * once at start with the agent's helper (packages/agent/dist/leoflow-sandbox, next to the agent
 * entry), handed to every agent in its environment, shown in the start banner and by doctor.
 * The agent owns the sandbox itself (packages/agent/src/sandbox/); the control plane only decides
 * the mode, so the probe and the world-writable scan run once, not per attempt.
 */
export interface SandboxPlan {
  mode: SandboxMode;
  isolation: IsolationMode;
  network: NetworkMode;
  /** the helper, or null when it was not built */
  helper: string | null;
  /** why namespaces are not in force */
  why: string | null;
  landlockAbi: number;
  landlock: boolean;
  /** world-writable dirs found at start: a private tmpfs each (namespaces), swept (fallback) */
  worldWritable: string[];
  scanComplete: boolean;
  writablePaths: string[];
  tmpfsSizeBytes: number;
  exposures: string[];
}

export const HELPER_NAME = 'leoflow-sandbox';
/** Where agents coordinate uid claims and note their ranges (packages/agent/src/attempt-uid.ts) */
export const DEFAULT_UID_LOCK_DIR_PATH = '/run/leoflow/attempt-uids';
const STANDARD_TMP_DIRS = ['/tmp', '/var/tmp', '/dev/shm', '/run/lock'];

export function helperBeside(agentEntry: string): string | null {
  const p = join(dirname(agentEntry), HELPER_NAME);
  try {
    accessSync(p, fsc.X_OK);
    return p;
  } catch {
    return null;
  }
}

export interface ProbeResult {
  namespaces: boolean;
  why: string;
  landlock_abi: number;
  world_writable?: string[];
  scan_complete?: boolean;
}

export function probeSandbox(helper: string, scan: boolean): ProbeResult {
  const r = spawnSync(helper, ['probe', ...(scan ? ['--world-writable'] : [])], {
    encoding: 'utf8',
    env: {},
    timeout: 20_000,
  });
  if (r.status !== 0) {
    return {
      namespaces: false,
      why: `${helper} failed to run (${r.error?.message ?? `exit ${r.status}`})`,
      landlock_abi: 0,
    };
  }
  return JSON.parse(r.stdout) as ProbeResult;
}

/**
 * Decides the mode: namespaces when root and the host allows them; the per-uid fallback when
 * not (auto) or asked for (fallback); nothing of either when not root. execution.isolation
 * required refuses to start otherwise, naming what is missing (LF_SANDBOX_REQUIRED).
 */
export function resolveSandboxPlan(
  cfg: {
    agentEntry: string;
    isolation: IsolationMode;
    network: NetworkMode;
    writablePaths: string[];
    tmpfsSizeBytes: number;
  },
  opts: { isRoot?: boolean; probe?: (helper: string) => ProbeResult } = {},
): SandboxPlan {
  const isRoot = opts.isRoot ?? (typeof process.getuid === 'function' && process.getuid() === 0);
  const helper = helperBeside(cfg.agentEntry);
  const probe = helper ? (opts.probe ?? ((h) => probeSandbox(h, true)))(helper) : undefined;
  let mode: SandboxMode;
  let why: string | null = null;
  if (!isRoot) {
    mode = 'none';
    why = 'the control plane is not root: no per-attempt uids, no namespaces';
  } else if (!helper) {
    mode = 'uid';
    why = `the sandbox helper ${join(dirname(cfg.agentEntry), HELPER_NAME)} was not built (no C compiler at build time: install gcc and libc6-dev, then npm run build)`;
  } else if (cfg.isolation === 'fallback') {
    mode = 'uid';
    why = 'execution.isolation is fallback';
  } else if (probe?.namespaces) {
    mode = 'namespaces';
  } else {
    mode = 'uid';
    why = probe?.why || 'namespaces are not available here';
  }
  if (cfg.isolation === 'required' && mode !== 'namespaces') {
    throw new ConfigError(
      'LF_SANDBOX_REQUIRED',
      `execution.isolation is required, but ${why ?? 'namespaces are not in force'}; fix that, or set execution.isolation auto to run with the per-uid fallback (doctor names what it leaves open)`,
    );
  }
  const landlockAbi = probe?.landlock_abi ?? 0;
  const landlock = helper !== null && landlockAbi >= 6;
  return {
    mode,
    isolation: cfg.isolation,
    network: cfg.network,
    helper,
    why,
    landlockAbi,
    landlock,
    worldWritable: [...new Set([...STANDARD_TMP_DIRS, ...(probe?.world_writable ?? [])])],
    scanComplete: probe?.scan_complete ?? false,
    writablePaths: cfg.writablePaths,
    tmpfsSizeBytes: cfg.tmpfsSizeBytes,
    exposures: sandboxExposures(mode, cfg.network, landlock, helper !== null),
  };
}

/** What every agent of this control plane reads (packages/agent/src/sandbox/launcher.ts). */
export function sandboxAgentEnv(
  plan: SandboxPlan,
  masks: string[],
  installId: string | null,
): Record<string, string> {
  return {
    LEOFLOW_SANDBOX_MODE: plan.mode,
    LEOFLOW_SANDBOX_ISOLATION: plan.isolation,
    LEOFLOW_SANDBOX_NETWORK: plan.network,
    LEOFLOW_SANDBOX_TMPFS: plan.worldWritable.join(':'),
    LEOFLOW_SANDBOX_TMPFS_SIZE: String(plan.tmpfsSizeBytes),
    LEOFLOW_SANDBOX_WRITABLE_PATHS: plan.writablePaths.join(':'),
    LEOFLOW_SANDBOX_MASK: masks.join(':'),
    ...(plan.helper ? { LEOFLOW_SANDBOX_HELPER: plan.helper } : {}),
    ...(installId ? { LEOFLOW_INSTALLATION_ID: installId } : {}),
  };
}

/**
 * Removes a finished attempt's work dir without ever following a link (issue 33, finding 2: a
 * recursive delete by path, as root, followed a symlink a task swapped in mid-delete). The
 * helper opens every level O_NOFOLLOW|O_DIRECTORY relative to its parent's fd, as the tree's
 * owner first (the attempt's uid), then what is left as root. Without the helper: GNU `rm -rf`
 * (openat, never following a link) as the tree's owner, then rmdir. Resolves true when gone.
 */
export function removeWorkDir(path: string, helper: string | null): Promise<boolean> {
  return new Promise((resolve) => {
    const env: NodeJS.ProcessEnv = {};
    for (const k of ['LEOFLOW_TEST_REMOVE_SWAP', 'LEOFLOW_TEST_FAULT_ARM']) {
      if (process.env[k] !== undefined) env[k] = process.env[k];
    }
    const child = helper
      ? spawn(helper, ['remove', path], { env, stdio: 'ignore' })
      : spawn(
          '/bin/sh',
          [
            '-c',
            'owner=$(stat -c %u -- "$1") || exit 0; if [ "$(id -u)" = 0 ] && [ "$owner" != 0 ]; then setpriv --reuid="$owner" --regid="$owner" --clear-groups -- /bin/rm -rf --one-file-system -- "$1"/* "$1"/.[!.]* "$1"/..?*; fi; /bin/rm -rf --one-file-system -- "$1"',
            'sh',
            path,
          ],
          { env: { PATH: '/usr/bin:/bin' }, stdio: 'ignore' },
        );
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}
