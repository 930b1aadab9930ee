import { spawnSync } from 'node:child_process';
import { accessSync, constants as fsc, lstatSync, rmdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The sandbox helper (packages/agent/native/leoflow-sandbox.c, built next to the agent's entry
 * as dist/leoflow-sandbox): the one exec between an agent and its task, and the only code that
 * removes or sweeps trees a task could have written (never following a link).
 */
export const HELPER_NAME = 'leoflow-sandbox';
export const HELPER_ENV = 'LEOFLOW_SANDBOX_HELPER';

/** The helper's path, or undefined when it was not built (no C compiler at build time). */
export function findHelper(
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  const candidates = [
    env[HELPER_ENV],
    process.argv[1] ? join(dirname(process.argv[1]), HELPER_NAME) : undefined,
    // the bundle's own directory (dist/), when something else started it (an image's wrapper)
    typeof __dirname === 'string' ? join(__dirname, HELPER_NAME) : undefined,
  ];
  for (const c of candidates) {
    if (!c) continue;
    try {
      accessSync(c, fsc.X_OK);
      return c;
    } catch {
      // not there
    }
  }
  return undefined;
}

export interface HelperProbe {
  /** mount, IPC, PID and UTS namespaces and the mounts the sandbox makes all work here */
  namespaces: boolean;
  /** why not, when they do not */
  why: string;
  landlockAbi: number;
  /** world-writable directories found on the host (only when asked for) */
  worldWritable: string[];
  scanComplete: boolean;
}

/** Runs `leoflow-sandbox probe` (a few ms; with the scan, tens of ms). */
export function probeHelper(helper: string, scanWorldWritable: boolean): HelperProbe {
  const r = spawnSync(helper, ['probe', ...(scanWorldWritable ? ['--world-writable'] : [])], {
    encoding: 'utf8',
    env: {},
    timeout: 20_000,
  });
  if (r.status !== 0 || typeof r.stdout !== 'string') {
    return {
      namespaces: false,
      why: `the sandbox helper ${helper} failed to run (${r.error?.message ?? `exit ${r.status}`})`,
      landlockAbi: 0,
      worldWritable: [],
      scanComplete: false,
    };
  }
  const j = JSON.parse(r.stdout) as {
    namespaces: boolean;
    why: string;
    landlock_abi: number;
    world_writable?: string[];
    scan_complete?: boolean;
  };
  return {
    namespaces: j.namespaces,
    why: j.why,
    landlockAbi: j.landlock_abi,
    worldWritable: j.world_writable ?? [],
    scanComplete: j.scan_complete ?? false,
  };
}

/**
 * Removes `path` (a work dir) without ever following a link: the helper opens every directory
 * O_NOFOLLOW|O_DIRECTORY relative to its parent's fd and unlinks relative to it, first as the
 * tree's owner (the attempt's uid), then what is left as root. Without the helper: `rm -rf` as
 * the tree's owner (GNU rm walks with openat and never follows a link either; as that uid it can
 * touch nothing of anyone else), then an rmdir as root, which follows nothing. Never a recursive
 * delete by path as root. True when the path is gone.
 */
export function removeTree(
  path: string,
  helper: string | undefined,
  env: NodeJS.ProcessEnv = {},
): boolean {
  if (helper) {
    const r = spawnSync(helper, ['remove', path], { env: testHookEnv(env), stdio: 'ignore' });
    return r.status === 0 && !exists(path);
  }
  let owner: number;
  try {
    const st = lstatSync(path);
    if (!st.isDirectory()) {
      spawnSync('/bin/rm', ['-f', '--', path], { stdio: 'ignore' });
      return !exists(path);
    }
    owner = st.uid;
  } catch {
    return true;
  }
  const asOwner = process.getuid?.() === 0 && owner !== 0 ? { uid: owner, gid: owner } : {};
  spawnSync(
    '/bin/sh',
    [
      '-c',
      'cd -P -- "$1" && exec /bin/rm -rf --one-file-system -- ./* ./.[!.]* ./..?*',
      'sh',
      path,
    ],
    {
      ...asOwner,
      env: { PATH: '/usr/bin:/bin' },
      stdio: 'ignore',
    },
  );
  try {
    rmdirSync(path);
  } catch {
    // not empty (another uid's files in a dir the task opened to all): left, reported
  }
  return !exists(path);
}

/** The swap hook reaches the helper only from a test that armed it (see leoflow-sandbox.c). */
function testHookEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const k of ['LEOFLOW_TEST_REMOVE_SWAP', 'LEOFLOW_TEST_FAULT_ARM']) {
    const v = env[k] ?? process.env[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}

function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Per-uid fallback (no namespaces): as `uid`, removes everything it owns under each
 * world-writable dir (any depth, no link followed, no mount crossed), strips setuid/setgid from
 * files of it that it cannot remove, and removes its System V IPC objects. Without the helper:
 * GNU find as that uid (fts, which follows no link), IPC left (reported by doctor).
 */
export function sweepUidLeftovers(
  uid: number,
  dirs: readonly string[],
  helper: string | undefined,
  keep: readonly string[] = [],
): boolean {
  if (dirs.length === 0) return true;
  if (helper) {
    const keepArgs = keep.flatMap((k) => ['--keep', k]);
    const r = spawnSync(helper, ['sweep', '--uid', String(uid), ...keepArgs, ...dirs], {
      env: testHookEnv({}),
      stdio: 'ignore',
    });
    return r.status === 0;
  }
  let ok = true;
  const prune = keep.flatMap((k) => ['-path', k, '-prune', '-o']);
  for (const dir of dirs) {
    const r = spawnSync(
      '/usr/bin/find',
      [
        dir,
        '-xdev',
        '-mindepth',
        '1',
        ...prune,
        '-user',
        String(uid),
        '(',
        '-perm',
        '/6000',
        '-exec',
        'chmod',
        'ug-s',
        '{}',
        '+',
        ')',
        ',',
        '-user',
        String(uid),
        '-delete',
      ],
      { uid, gid: uid, env: { PATH: '/usr/bin:/bin' }, stdio: 'ignore' },
    );
    if (r.status !== 0) ok = false;
  }
  return ok;
}

/** As `uid`: clears its user, user-session and persistent keyrings (nothing of it outlives the attempt). */
export function clearUidKeyrings(uid: number, helper: string | undefined): boolean {
  if (helper) {
    return (
      spawnSync(helper, ['clear-keyrings', '--uid', String(uid)], { env: {}, stdio: 'ignore' })
        .status === 0
    );
  }
  // keyutils' keyctl, when installed (Debian's keyutils)
  const r = spawnSync(
    '/bin/sh',
    [
      '-c',
      'command -v keyctl >/dev/null || exit 0; keyctl clear @u; keyctl clear @us; p=$(keyctl get_persistent @s 2>/dev/null) && keyctl clear "$p"; exit 0',
    ],
    { uid, gid: uid, env: { PATH: '/usr/bin:/bin' }, stdio: 'ignore' },
  );
  return r.status === 0;
}
