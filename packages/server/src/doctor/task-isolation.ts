import { join } from 'node:path';
import {
  ATTEMPT_UID_RANGE_KEY,
  isLeoflowError,
  parseUidRange,
  uidRangeCollisionMessage,
  uidRangeCollisions,
} from '@leoflow/core';
import type { ServerConfig } from '../config/server-config.js';
import { INSTALL_ID_FILE, SDK_ENTRY, workRootFor } from '../executor/work-root.js';
import {
  errorText,
  findExecutable,
  octal,
  readableByOthers,
  safeStat,
  sh,
  type CheckFn,
} from './facts.js';
import type { SectionContext } from './findings.js';
import type { CheckStatus, DoctorDeps, IsolationPosture, Posture } from './types.js';

/**
 * Doctor section: task isolation — which user attempts run as (per-attempt uids, a shared
 * run-as user, or the control plane's own), the kernel limits that bound them (RLIMIT_NPROC,
 * cgroups), the work root and the SDK copy node tasks import, and the exposures of a shared or
 * same uid.
 *
 * Seam for the executor port v2 (issue 12): these facts mirror the subprocess executor's own
 * resolution (resolveRunAs, the uid pool, prlimit) for a configuration, not a running executor.
 * When the port carries posture, this section asks the configured executor instead.
 */

const PASSWD_FILE = '/etc/passwd';
const PTRACE_SCOPE_FILE = '/proc/sys/kernel/yama/ptrace_scope';

export interface TaskIsolationFindings {
  tasksRunAs: Posture['tasks_run_as'];
  isolation: IsolationPosture;
}

export async function taskIsolation(ctx: SectionContext): Promise<TaskIsolationFindings> {
  const { cfg, deps, check, expose } = ctx;
  const runAs = await runAsPosture(cfg, deps);
  check('tasks.run_as', runAs.status, runAs.message);
  const isolation = await isolationPosture(cfg, deps, runAs, check);
  hostAgentCheck(cfg, deps, isolation, check);
  if (isolation.mode !== 'per-attempt' && runAs.status !== 'fail') {
    expose(
      'tasks.shared_uid',
      `Every attempt runs under the same uid${runAs.uid !== null ? ` (${runAs.uid})` : ''}: a task can read another running task's /proc/<pid>/environ (the Variables and Connections delivered to it), list its work dir through /proc/<pid>/cwd and signal it — across DAGs and tenants — and a child it detaches with setsid outlives its attempt.`,
      'Run Lite as root with execution.attempt_uid_range on (the default; --attempt-uid-range), so every attempt gets a uid of its own.',
    );
  }
  if (!runAs.isolated && runAs.status !== 'fail') {
    const ptrace = (await deps.readText(PTRACE_SCOPE_FILE))?.trim();
    const memory =
      ptrace === '0'
        ? ", and, since ptrace is allowed between one user's processes (ptrace_scope 0), the agent's memory and the attempt token in it"
        : ptrace === undefined
          ? ", and, where ptrace is allowed, the agent's memory and the attempt token in it"
          : '';
    expose(
      'tasks.same_user',
      `Tasks run as the control plane's user${runAs.uid !== null ? ` (uid ${runAs.uid})` : ''}, so task code can read the data dir — the vault keyring, the signing keys, the admin token and the database${memory}.`,
      'Run Lite as root with --run-as-user <an unprivileged account> (default nobody), or as a dedicated account that owns nothing else, when tasks are not fully trusted.',
    );
  }
  return {
    tasksRunAs: {
      isolated: runAs.isolated,
      user: runAs.user,
      uid: runAs.uid,
      summary: runAs.summary,
    },
    isolation,
  };
}

/**
 * execution.host_agent: one long-lived agent holds every running attempt's token. Root with
 * attempt uids: tasks cannot reach it (another uid and PID namespace, no ptrace, a 0700 data dir).
 * Not root: it runs as the user, tasks too, under the sandbox's fallback (`none`).
 */
function hostAgentCheck(
  cfg: ServerConfig,
  deps: DoctorDeps,
  isolation: IsolationPosture,
  check: CheckFn,
): void {
  // Off (the default): nothing to say beyond the sections above (one agent per attempt).
  if (!cfg.subprocess.hostAgent) return;
  if (isolation.mode === 'per-attempt') {
    check(
      'tasks.host_agent',
      'ok',
      'on: one host agent (root) runs every local attempt, each in its own sandbox under its own uid, token and session; tasks cannot reach it (another uid and PID namespace, no ptrace, its socket and files in the 0700 data dir)',
    );
  } else if (isolation.mode === 'shared') {
    check(
      'tasks.host_agent',
      'fail',
      'on, with a shared execution.run_as_user: standalone refuses to start; the host agent needs a uid per attempt (--attempt-uid-range) or --host-agent off',
    );
  } else {
    check(
      'tasks.host_agent',
      'warn',
      `on, not root: the host agent runs as this user (uid ${deps.uid ?? '?'}) with the sandbox's fallback (no per-attempt uid), so a task can read every running attempt's token from it where ptrace is allowed, and connect to its socket; a task of an agent that dies is not stopped before its retry; run Lite as root when tasks are not fully trusted`,
    );
  }
}

interface RunAsPosture {
  isolated: boolean;
  user: string | null;
  uid: number | null;
  summary: string;
  status: CheckStatus;
  message: string;
}

/** Mirrors resolveRunAs (executor/run-as-user.ts) with the uid and passwd file injected. */
async function runAsPosture(cfg: ServerConfig, deps: DoctorDeps): Promise<RunAsPosture> {
  const user = cfg.subprocess.runAsUser;
  const self = deps.uid;
  const notIsolated = (summary: string, message: string): RunAsPosture => ({
    isolated: false,
    user: null,
    uid: self,
    summary,
    status: 'warn',
    message,
  });
  if (self === null) {
    return notIsolated(
      "this control plane's user: task code can read the data dir",
      "this platform has no user ids to drop to: tasks run as the control plane's user and can read the data dir",
    );
  }
  if (self !== 0) {
    return notIsolated(
      `this control plane's user (uid ${self}): task code can read the data dir`,
      `not running as root, so tasks run as uid ${self} too and can read the data dir; run Lite as root with --run-as-user <unprivileged user>, or as a dedicated account`,
    );
  }
  if (cfg.subprocess.attemptUidRange !== null) {
    return {
      isolated: true,
      user: null,
      uid: null,
      summary: `a uid of its own per attempt, from ${cfg.subprocess.attemptUidRange} (no supplementary groups), outside the 0700 data dir`,
      status: 'ok',
      message: `every attempt runs under its own uid and gid from ${ATTEMPT_UID_RANGE_KEY} ${cfg.subprocess.attemptUidRange}, without supplementary groups, in a 0700 work dir it owns; when it ends every process of that uid is killed before the uid is reused`,
    };
  }
  if (user === null) {
    return notIsolated(
      'root (--run-as-user none): task code can read the data dir',
      'running as root with --run-as-user none: tasks run as root; set --run-as-user to an unprivileged account (default nobody)',
    );
  }
  const resolved = lookupUser(user, await deps.readText(PASSWD_FILE));
  if (resolved === null) {
    return {
      isolated: false,
      user,
      uid: null,
      summary: `${user} (not an account on this machine)`,
      status: 'fail',
      message: `execution.run_as_user names "${user}", which is not an account on this machine: standalone refuses to start; create it (useradd --system ${user}) or set --run-as-user to an existing unprivileged user`,
    };
  }
  if (resolved.uid === 0) {
    return {
      isolated: false,
      user,
      uid: 0,
      summary: `${user} (uid 0): task code can read the data dir`,
      status: 'warn',
      message: `--run-as-user ${user} is uid 0: tasks run as root; set it to an unprivileged account (default nobody)`,
    };
  }
  return {
    isolated: true,
    user,
    uid: resolved.uid,
    summary: `${user} (uid ${resolved.uid}), outside the 0700 data dir`,
    status: 'ok',
    message: `tasks run as ${user} (uid ${resolved.uid}, gid ${resolved.gid}) in per-attempt work dirs; the data dir (mode 0700) is closed to them`,
  };
}

/**
 * Per-attempt uids, RLIMIT_NPROC, cgroup limits, the work root and the SDK copy node tasks
 * import: what is enforced on this machine, each as a check, and the posture summary.
 */
async function isolationPosture(
  cfg: ServerConfig,
  deps: DoctorDeps,
  runAs: RunAsPosture,
  check: CheckFn,
): Promise<IsolationPosture> {
  const ex = cfg.subprocess;
  const perAttempt = deps.uid === 0 && ex.attemptUidRange !== null;
  const mode: IsolationPosture['mode'] = perAttempt
    ? 'per-attempt'
    : runAs.isolated
      ? 'shared'
      : 'none';
  let nproc: IsolationPosture['nproc_limit'] = {
    limit: 0,
    enforced: false,
    detail:
      'not applied: attempts share a uid, so a per-uid process limit would bound them all together',
  };
  let cgroup: IsolationPosture['cgroup_limits'] = {
    enforced: false,
    detail: 'not enforced: attempts have no cgroup of their own',
  };
  if (perAttempt && ex.attemptUidRange !== null) {
    await checkAttemptUidRange(ex.attemptUidRange, deps, check);
    nproc = await nprocPosture(ex.attemptNprocLimit, deps, check);
    cgroup = await cgroupPosture(deps, check);
  }
  const { workRoot, sdk } = await workRootPosture(cfg, deps, check);
  return {
    mode,
    attempt_uid_range: perAttempt ? ex.attemptUidRange : null,
    nproc_limit: nproc,
    cgroup_limits: cgroup,
    work_root: workRoot,
    task_sdk: sdk,
  };
}

/** Whether this process's cgroup v2 node offers memory and pids to a subtree it could create. */
async function cgroupV2Delegation(
  deps: DoctorDeps,
): Promise<{ delegated: true; where: string } | { delegated: false; why: string }> {
  const self = await deps.readText('/proc/self/cgroup');
  const mountinfo = await deps.readText('/proc/self/mountinfo');
  const path = /^0::(.*)$/m.exec(self ?? '')?.[1];
  const mount = (mountinfo ?? '')
    .split('\n')
    .map((l) => l.split(' '))
    .find((f) => f[f.indexOf('-') + 1] === 'cgroup2')?.[4];
  if (path === undefined || mount === undefined)
    return { delegated: false, why: 'cgroup v2 is not mounted for this process' };
  const node = join(mount, path);
  const controllers = (await deps.readText(join(node, 'cgroup.controllers')))?.split(/\s+/) ?? [];
  if (!controllers.includes('memory') || !controllers.includes('pids'))
    return {
      delegated: false,
      why: `cgroup v2 at ${node} offers no memory and pids controllers: they are on cgroup v1 here, or not delegated to this service`,
    };
  return { delegated: true, where: node };
}

function lookupUser(user: string, passwd: string | null): { uid: number; gid: number } | null {
  const numeric = /^(\d+)(?::(\d+))?$/.exec(user);
  if (numeric) {
    const uid = Number(numeric[1]);
    return { uid, gid: numeric[2] === undefined ? uid : Number(numeric[2]) };
  }
  for (const line of (passwd ?? '').split('\n')) {
    const f = line.split(':');
    if (f[0] === user && f[2] !== undefined && f[3] !== undefined) {
      return { uid: Number(f[2]), gid: Number(f[3]) };
    }
  }
  return null;
}

/** The per-attempt uid range must hold no account, group or subordinate id range. */
async function checkAttemptUidRange(
  attemptUidRange: string,
  deps: DoctorDeps,
  check: CheckFn,
): Promise<void> {
  try {
    const range = parseUidRange(attemptUidRange);
    const read = (f: string) => deps.readText(f);
    const hits = uidRangeCollisions(range, {
      passwd: await read('/etc/passwd'),
      group: await read('/etc/group'),
      subuid: await read('/etc/subuid'),
      subgid: await read('/etc/subgid'),
    });
    if (hits.length > 0)
      check(
        'tasks.attempt_uid_range',
        'fail',
        `${uidRangeCollisionMessage(range, hits)}; standalone refuses to start`,
      );
    else
      check(
        'tasks.attempt_uid_range',
        'ok',
        `${ATTEMPT_UID_RANGE_KEY} ${attemptUidRange} (${range.last - range.first + 1} uids) holds no account, group or subordinate id range of /etc/passwd, /etc/group, /etc/subuid, /etc/subgid`,
      );
  } catch (err) {
    check('tasks.attempt_uid_range', 'fail', isLeoflowError(err) ? err.message : errorText(err));
  }
}

/** RLIMIT_NPROC per attempt uid, applied through prlimit (Node cannot set rlimits itself). */
async function nprocPosture(
  limit: number,
  deps: DoctorDeps,
  check: CheckFn,
): Promise<IsolationPosture['nproc_limit']> {
  let nproc: IsolationPosture['nproc_limit'];
  const prlimit = await findExecutable(deps, 'prlimit');
  if (limit <= 0) {
    nproc = {
      limit: 0,
      enforced: false,
      detail: 'not applied (execution.attempt_nproc_limit is 0)',
    };
    check(
      'tasks.nproc_limit',
      'warn',
      'execution.attempt_nproc_limit is 0: a task can fork without bound; set --attempt-nproc-limit (default 4096)',
    );
  } else if (prlimit === null) {
    nproc = {
      limit: limit,
      enforced: false,
      detail: 'not applied: prlimit (util-linux) is not on PATH',
    };
    check(
      'tasks.nproc_limit',
      'warn',
      `prlimit (util-linux) is not on PATH, so RLIMIT_NPROC ${limit} is not applied to attempts (Node cannot set rlimits itself); install util-linux`,
    );
  } else {
    nproc = {
      limit: limit,
      enforced: true,
      detail: `RLIMIT_NPROC ${limit} per attempt uid, set by ${prlimit}`,
    };
    check(
      'tasks.nproc_limit',
      'ok',
      `each attempt's uid is limited to ${limit} processes and threads (RLIMIT_NPROC via ${prlimit})`,
    );
  }
  return nproc;
}

/** Whether attempts' memory and pids are bounded by a cgroup (not yet: said as a warning). */
async function cgroupPosture(
  deps: DoctorDeps,
  check: CheckFn,
): Promise<IsolationPosture['cgroup_limits']> {
  const v2 = await cgroupV2Delegation(deps);
  const cgroup = {
    enforced: false,
    detail: v2.delegated
      ? `not enforced: cgroup v2 delegates memory and pids at ${v2.where}, but this build does not place attempts in cgroups`
      : `not enforced: ${v2.why}`,
  };
  check(
    'tasks.cgroup_limits',
    'warn',
    `attempt memory and pids are not bounded by a cgroup: ${cgroup.detail.replace(/^not enforced: /, '')}; RLIMIT_NPROC is the only per-attempt limit`,
  );
  return cgroup;
}

/** The installation's work root (owner and mode) and the SDK copy node tasks import from it. */
async function workRootPosture(
  cfg: ServerConfig,
  deps: DoctorDeps,
  check: CheckFn,
): Promise<{ workRoot: string | null; sdk: IsolationPosture['task_sdk'] }> {
  const ex = cfg.subprocess;
  let workRoot = ex.workDir;
  if (workRoot === null) {
    const id = (await deps.readText(join(cfg.dataDir, INSTALL_ID_FILE)))?.trim();
    workRoot = id && /^[0-9a-f]{16}$/.test(id) ? workRootFor(id) : null;
  }
  let sdk: IsolationPosture['task_sdk'] = { file: null, readable: null };
  if (workRoot === null) {
    check(
      'work_root.owner',
      'warn',
      `no install id in ${join(cfg.dataDir, INSTALL_ID_FILE)} yet: standalone creates it and the work root /tmp/leoflow-work-<install id> on first start`,
    );
  } else {
    const root = await safeStat(deps)(workRoot);
    if (root.info === null) {
      check(
        'work_root.owner',
        'warn',
        `${workRoot} does not exist yet: standalone creates it (mode 0711) at start`,
      );
    } else if (
      root.info.kind !== 'directory' ||
      (deps.uid !== null && root.info.uid !== deps.uid)
    ) {
      check(
        'work_root.owner',
        'fail',
        `${workRoot} is not a directory owned by uid ${deps.uid ?? '?'}: standalone refuses to start; remove it`,
      );
    } else if ((root.info.mode & 0o022) !== 0) {
      check(
        'work_root.owner',
        'fail',
        `${workRoot} is mode ${octal(root.info.mode)}: others may write there; run \`chmod 711 ${sh(workRoot)}\``,
      );
    } else {
      check(
        'work_root.owner',
        'ok',
        `${workRoot} (this installation's work root) is mode ${octal(root.info.mode)}, owned by uid ${root.info.uid}`,
      );
    }
    if (root.info !== null) {
      const file = join(workRoot, SDK_ENTRY);
      const readable = await readableByOthers(deps, file);
      sdk = { file, readable };
      if (readable === null)
        check(
          'tasks.sdk_reachable',
          'warn',
          `${file} does not exist: node tasks cannot \`import '@leoflow/sdk'\`; run \`npm run build\` and restart standalone (it copies the SDK bundle there)`,
        );
      else if (!readable)
        check(
          'tasks.sdk_reachable',
          'fail',
          `${file} or a directory above it is closed to other users: node tasks, running under unprivileged uids, cannot import @leoflow/sdk; restart standalone (it recreates it 0755/0644)`,
        );
      else
        check(
          'tasks.sdk_reachable',
          'ok',
          `node tasks import @leoflow/sdk from ${file}, readable by an unprivileged uid`,
        );
    }
  }
  return { workRoot, sdk };
}
