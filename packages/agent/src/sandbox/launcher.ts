import { accessSync, constants as fsc, lstatSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import {
  DEFAULT_SANDBOX_TMPFS_SIZE,
  parseIsolationMode,
  parseNetworkMode,
  parseTmpfsSize,
  parseWritablePaths,
  type IsolationMode,
  type NetworkMode,
  type SandboxMode,
  ConfigError,
  sandboxExposures as exposuresOf,
} from '@leoflow/core';
import type { LaunchPlan, RunAs } from '../task-process.js';
import {
  clearUidKeyrings,
  findHelper,
  probeHelper,
  removeTree,
  sweepUidLeftovers,
  type HelperProbe,
} from './helper.js';

/**
 * The one way the agent side starts a task (docs/security.md, "The sandbox"): the per-attempt
 * agent, the runner daemon and (issue 37) a per-host agent each hold one TaskLauncher for the
 * host and ask it for every attempt. It keeps no per-attempt state, so one long-lived process can
 * launch many sandboxed tasks at once; what an attempt needs (its uid, work dir, status file)
 * travels in the call.
 *
 * Modes, decided once per host:
 *   namespaces  systemd's DynamicUser=yes: the task's own mount, IPC, PID and UTS namespaces
 *               (and network, with execution.network none), private tmpfs on every
 *               world-writable dir, the rest read-only, no_new_privs, a fresh session keyring,
 *               only fds 0-2, Landlock scoping where the kernel has it; the agent stays outside
 *   uid         the per-uid fallback (no namespaces here, or execution.isolation fallback): the
 *               same helper without namespaces (no_new_privs, keyring, fds, Landlock), and at
 *               release a sweep as the uid of every world-writable dir
 *   none        the control plane is not root: no per-attempt uid; the helper still applies
 *               no_new_privs, the keyring, the fd rule and Landlock
 */
export interface SandboxSettings {
  isolation: IsolationMode;
  network: NetworkMode;
  /** operator-listed paths the task may write (bind-mounted read-write) */
  writablePaths: string[];
  /** size cap of each private tmpfs, bytes */
  tmpfsSizeBytes: number;
  /** the world-writable dirs to give private tmpfs (and to sweep in the fallback); undefined: scan */
  worldWritable?: string[] | undefined;
  /** paths tasks must not see at all (the data dir, keys, /run/leoflow) */
  masks: string[];
  /** paths visible read-only inside (the SDK's install path) */
  readOnly: string[];
  /** root-only dir of per-attempt exit-status records (undefined: none) */
  statusDir?: string | undefined;
  /** the mode the control plane decided (its probe); undefined: probe here */
  decided?: SandboxMode | undefined;
}

export const DEFAULT_STATUS_DIR = '/run/leoflow/attempt-status';
export const ALWAYS_MASKED = ['/run/leoflow'];
/** Always private, found or not (the places every distribution opens to all). */
export const STANDARD_TMP_DIRS = ['/tmp', '/var/tmp', '/dev/shm', '/run/lock'];

export interface SandboxPosture {
  mode: SandboxMode;
  /** the helper's path, or null when it was not built */
  helper: string | null;
  network: NetworkMode;
  /** Landlock scoping of abstract unix sockets and signals (kernel ABI >= 6) */
  landlock: boolean;
  landlockAbi: number;
  /** private tmpfs (namespaces) or swept as the uid (fallback) */
  worldWritable: string[];
  /** why namespaces are not in force, when they are not */
  why: string | null;
  /** what attempts still share in this mode (doctor and the start banner list them) */
  exposures: string[];
}

export class SandboxRequiredError extends ConfigError {
  constructor(missing: string) {
    super(
      'LF_SANDBOX_REQUIRED',
      `execution.isolation is required, but ${missing}; fix that, or set execution.isolation auto to run with the per-uid fallback (doctor names what it leaves open)`,
    );
  }
}

export interface LaunchOptions {
  workdir: string;
  /** the attempt's uid/gid (root only) */
  runAs: RunAs | undefined;
  /** RLIMIT_NPROC for the uid; 0 = none */
  nproc: number;
  /** SIGTERM → SIGKILL grace for what the task leaves behind (ms) */
  graceMs: number;
  /** the per-attempt exit-status record (statusFileFor) */
  statusFile?: string | undefined;
  /** more paths the task reads (node_modules of the SDK) */
  readOnly?: readonly string[];
  /** the task's PATH (where a bare interpreter name is looked up) */
  pathVar?: string | undefined;
}

function resolvable(file: string, pathVar: string | undefined): boolean {
  const candidates = file.includes('/')
    ? [file]
    : (pathVar ?? '')
        .split(':')
        .filter(Boolean)
        .map((d) => path.join(d, file));
  return candidates.some((c) => {
    try {
      accessSync(c, fsc.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

export class TaskLauncher {
  readonly posture: SandboxPosture;
  readonly #settings: SandboxSettings;
  readonly #helper: string | undefined;
  readonly #isRoot: boolean;

  private constructor(
    settings: SandboxSettings,
    posture: SandboxPosture,
    helper: string | undefined,
    isRoot: boolean,
  ) {
    this.#settings = settings;
    this.posture = posture;
    this.#helper = helper;
    this.#isRoot = isRoot;
  }

  /**
   * Decides the mode for this host: the control plane's decision when it passed one, else a
   * probe of the helper. `required` throws LF_SANDBOX_REQUIRED naming what is missing.
   */
  static create(
    settings: SandboxSettings,
    opts: { helper?: string | undefined; isRoot?: boolean; probe?: HelperProbe } = {},
  ): TaskLauncher {
    const isRoot = opts.isRoot ?? process.getuid?.() === 0;
    const helper = opts.helper ?? findHelper();
    let probe: HelperProbe | undefined = opts.probe;
    const needScan = settings.worldWritable === undefined;
    if (!probe && helper && (settings.decided === undefined || needScan))
      probe = probeHelper(helper, needScan);
    const worldWritable = uniq([
      ...STANDARD_TMP_DIRS,
      ...(settings.worldWritable ?? probe?.worldWritable ?? []),
    ]);
    let mode: SandboxMode;
    let why: string | null = null;
    if (!isRoot) {
      mode = 'none';
      why = 'the agent is not root: no per-attempt uids, no namespaces';
    } else if (!helper) {
      mode = 'uid';
      why =
        'the sandbox helper (packages/agent/dist/leoflow-sandbox) was not built: no C compiler at build time';
    } else if (settings.isolation === 'fallback') {
      mode = 'uid';
      why = 'execution.isolation is fallback';
    } else if (settings.decided !== undefined) {
      mode = settings.decided;
      if (mode !== 'namespaces') why = 'the control plane found no namespaces on this host';
    } else if (probe?.namespaces) {
      mode = 'namespaces';
    } else {
      mode = 'uid';
      why = probe?.why || 'namespaces are not available here';
    }
    if (settings.isolation === 'required' && mode !== 'namespaces') {
      throw new SandboxRequiredError(why ?? 'namespaces are not in force');
    }
    const landlockAbi = probe?.landlockAbi ?? (helper ? probeHelper(helper, false).landlockAbi : 0);
    const posture: SandboxPosture = {
      mode,
      helper: helper ?? null,
      network: settings.network,
      landlock: helper !== undefined && landlockAbi >= 6,
      landlockAbi,
      worldWritable,
      why,
      exposures: exposuresOf(
        mode,
        settings.network,
        helper !== undefined && landlockAbi >= 6,
        helper !== undefined,
      ),
    };
    return new TaskLauncher(settings, posture, helper, isRoot);
  }

  /** Reads the sandbox settings the executor (or the runner daemon's flags) put in env. */
  static fromEnv(
    env: Record<string, string | undefined>,
    extra: Partial<SandboxSettings> = {},
  ): TaskLauncher {
    return TaskLauncher.create({ ...sandboxSettingsFromEnv(env), ...extra });
  }

  get helper(): string | undefined {
    return this.#helper;
  }

  /**
   * Where this attempt's exit status is recorded (root-only), or undefined (not root, no
   * helper). `name` identifies the attempt (task instance and try).
   */
  statusFileFor(name: string): string | undefined {
    const dir = this.#settings.statusDir;
    if (!dir || !this.#helper || !this.#isRoot) return undefined;
    try {
      mkdirSync(path.dirname(dir), { recursive: true, mode: 0o755 });
      mkdirSync(dir, { mode: 0o700 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') return undefined;
    }
    try {
      const st = lstatSync(dir);
      if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o077) !== 0) return undefined;
    } catch {
      return undefined;
    }
    return path.join(dir, `${name.replace(/[^A-Za-z0-9._-]/g, '_')}.status`);
  }

  /** Drops an attempt's status record once its outcome was delivered. */
  discardStatus(file: string | undefined): void {
    if (file) rmSync(file, { force: true });
  }

  /**
   * The task's launch plan, wrapped in the sandbox. The returned plan is spawned as the agent's
   * own user (root): the helper drops to `runAs` itself, after the namespaces and mounts.
   */
  wrap(plan: LaunchPlan, o: LaunchOptions): LaunchPlan {
    const helper = this.#helper;
    if (!helper) return plan;
    // An interpreter that is not there is reported as before (spawn's ENOENT: "task could not
    // be started"), not as the helper's exit 127; nothing runs either way.
    if (!resolvable(plan.file, o.pathVar)) return plan;
    const s = this.#settings;
    const args = ['run'];
    if (o.runAs) args.push('--uid', String(o.runAs.uid), '--gid', String(o.runAs.gid));
    if (o.nproc > 0 && o.runAs) args.push('--nproc', String(o.nproc));
    if (this.posture.landlock) args.push('--landlock');
    args.push('--grace-ms', String(o.graceMs), '--chdir', o.workdir);
    if (o.statusFile) args.push('--status-file', o.statusFile);
    // Namespaces wrap a task of an attempt uid (or the run-as user); a task left to run as the
    // agent's own root gets the rest (no_new_privs, keyring, Landlock, fds), not a root-owned
    // sandbox it could take apart.
    if (this.posture.mode === 'namespaces' && o.runAs) {
      args.push('--ns');
      if (s.network === 'none') args.push('--net-none');
      args.push('--tmpfs-size', String(s.tmpfsSizeBytes));
      for (const d of this.posture.worldWritable) args.push('--tmpfs', d);
      for (const p of [...s.readOnly, ...(o.readOnly ?? [])]) args.push('--ro-bind', p, p);
      args.push('--bind', o.workdir);
      for (const p of s.writablePaths) args.push('--bind', p);
      for (const p of uniq([...ALWAYS_MASKED, ...s.masks])) args.push('--mask', p);
    }
    args.push('--', plan.file, ...plan.args);
    return { file: helper, args, asRoot: true };
  }

  /**
   * Nothing of the uid outlives its attempt: its keyrings are cleared as the uid, and in the
   * fallback everything it left in a world-writable dir is swept as the uid (namespaces: those
   * were private tmpfs, gone with the namespace). Call once no process of the uid is left.
   */
  scrubUid(uid: number): void {
    clearUidKeyrings(uid, this.#helper);
    if (this.posture.mode !== 'namespaces')
      sweepUidLeftovers(
        uid,
        this.posture.worldWritable,
        this.#helper,
        this.#settings.writablePaths,
      );
  }

  /**
   * A non-root warm worker between attempts (all of them run as its one uid): everything that
   * uid owns in the world-writable dirs goes, without following a link. No root is involved.
   */
  wipeOwnLeftovers(uid: number): boolean {
    return sweepUidLeftovers(
      uid,
      this.posture.worldWritable,
      this.#helper,
      this.#settings.writablePaths,
    );
  }

  /** Removes a work dir without following links (see removeTree). */
  removeWorkdir(dir: string): boolean {
    return removeTree(dir, this.#helper);
  }
}

export function sandboxSettingsFromEnv(env: Record<string, string | undefined>): SandboxSettings {
  try {
    const list = (name: string) => parseWritablePaths(env[name] ?? '', name);
    const tmpfs = env['LEOFLOW_SANDBOX_TMPFS'];
    const decided = env['LEOFLOW_SANDBOX_MODE'];
    return {
      isolation: parseIsolationMode(
        env['LEOFLOW_SANDBOX_ISOLATION'] ?? 'auto',
        'LEOFLOW_SANDBOX_ISOLATION',
      ),
      network: parseNetworkMode(
        env['LEOFLOW_SANDBOX_NETWORK'] ?? 'host',
        'LEOFLOW_SANDBOX_NETWORK',
      ),
      writablePaths: list('LEOFLOW_SANDBOX_WRITABLE_PATHS'),
      tmpfsSizeBytes: env['LEOFLOW_SANDBOX_TMPFS_SIZE']
        ? parseTmpfsSize(env['LEOFLOW_SANDBOX_TMPFS_SIZE'], 'LEOFLOW_SANDBOX_TMPFS_SIZE')
        : DEFAULT_SANDBOX_TMPFS_SIZE,
      worldWritable: tmpfs === undefined ? undefined : list('LEOFLOW_SANDBOX_TMPFS'),
      masks: list('LEOFLOW_SANDBOX_MASK'),
      readOnly: list('LEOFLOW_SANDBOX_READ_ONLY'),
      statusDir: env['LEOFLOW_SANDBOX_STATUS_DIR'] || DEFAULT_STATUS_DIR,
      decided:
        decided === 'namespaces' || decided === 'uid' || decided === 'none' ? decided : undefined,
    };
  } catch (err) {
    throw err instanceof ConfigError ? err : new ConfigError('LF_CONFIG_INVALID', String(err));
  }
}

function uniq(xs: string[]): string[] {
  return [...new Set(xs.map((x) => x.replace(/\/+$/, '') || '/'))];
}
