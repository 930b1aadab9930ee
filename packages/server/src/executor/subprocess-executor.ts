import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  chownSync,
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  symlinkSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import {
  RegisterResponseSchema,
  TaskSpecSchema,
  type RegisterResponse,
  type TaskSpec,
} from '@leoflow/protocol';
import type { Logger } from 'pino';
import { StandbyPoolSize } from './standby-pool-size.js';
import { removeWorkDir } from './sandbox-plan.js';
import type { TaskIsolation } from './run-as-user.js';
import type {
  ClaimProbe,
  Executor,
  ExecutorPosture,
  PendingClaim,
  StartedAgent,
} from './executor.js';
import type { AttemptLaunch, HandOffRegistration } from '../attempts/attempt-launch.js';
import type { AgentExit } from '../attempts/attempt-lifecycle.js';

export interface SubprocessExecutorOptions {
  agentEntry: string;
  /** where per-attempt working directories go; must be outside the data directory */
  workDir: string;
  /** where agent diagnostics files go (inside the data directory: never task-readable) */
  diagnosticsDir: string;
  /** per-attempt uids (the agent allocates), one shared user, or none (not root) */
  isolation: TaskIsolation;
  /**
   * The attempt sandbox as boot decided it (executor/sandbox-plan.ts): its settings go into
   * every agent's environment, and its helper removes finished work dirs. Absent: agents decide
   * for themselves (execution.isolation auto), and work dirs go without the helper.
   */
  sandbox?: { env: Record<string, string>; helper: string | null };
  keepWorkDirs: boolean;
  /** PEM CA bundle the agent must trust for a TLS agent channel (NODE_EXTRA_CA_CERTS) */
  agentCaFile: string | null;
  /** node_modules node tasks resolve packages from (@leoflow/sdk); null = none */
  taskNodeModules: string | null;
  /** the directory holding the Python task SDK's `leoflow` package (PYTHONPATH of python tasks) */
  taskPythonPath?: string | null;
  /** agents kept started and connected, waiting for an attempt (0 = start each on demand) */
  standbyAgents: number;
  /**
   * How long after handing an attempt to a standby agent its replacement is started (default
   * STANDBY_REFILL_DELAY_MS). Starting it at once would put a synchronous spawn on the control
   * plane's event loop and a node boot on the CPU exactly while the handed-over agent prepares
   * and spawns its task.
   */
  standbyRefillDelayMs?: number;
  /** how long a pool grown past `standbyAgents` waits without a miss to shrink by one */
  standbyShrinkAfterMs?: number;
  logger: Logger;
}

/**
 * Long enough for a handed-over standby agent to start its task on a loaded machine; short against the time a new standby needs to boot, so a chain of tasks
 * still finds one ready (bench/inter-task-latency.mjs counts the hops that did).
 */
export const STANDBY_REFILL_DELAY_MS = 200;

/** The only variables an agent inherits: the control plane's own settings never reach it. */
const INHERITED_ENV = ['PATH', 'LANG', 'LC_ALL', 'TZ', 'SYSTEMROOT'];

/**
 * One agent process per attempt. The credential travels through an inherited pipe (fd 3) that
 * the agent reads to EOF and closes, so it is in neither the agent's environment nor its argv
 * and task code cannot find it under /proc.
 */
export class SubprocessExecutor implements Executor {
  /** How an attempt's credential reaches its agent (doctor's posture reads it from here). */
  static readonly tokenTransport = 'inherited pipe fd 3, memory only';
  readonly name = 'subprocess';
  readonly posture: ExecutorPosture = { tokenTransport: SubprocessExecutor.tokenTransport };
  private readonly children = new Map<string, ChildProcess>();
  private readonly listeners: ((exit: AgentExit) => void)[] = [];
  private readonly standby: StandbyAgent[] = [];
  private readonly poolSize: StandbyPoolSize;
  private readonly settleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly isolation: TaskIsolation;

  constructor(private readonly opts: SubprocessExecutorOptions) {
    mkdirSync(opts.workDir, { recursive: true, mode: 0o711 });
    this.isolation = opts.isolation;
    mkdirSync(opts.diagnosticsDir, { recursive: true, mode: 0o700 });
    this.poolSize = new StandbyPoolSize(opts.standbyAgents, Date.now, opts.standbyShrinkAfterMs);
    if (this.poolSize.ceiling > this.poolSize.floor) {
      this.settleTimer = setInterval(
        () => {
          if (this.poolSize.settle()) this.releaseExtraStandby();
        },
        Math.max(50, Math.floor(this.poolSize.quietMs / 4)),
      );
      this.settleTimer.unref();
    }
  }

  async start(launch: AttemptLaunch): Promise<StartedAgent> {
    // Minted first: a failure then leaves no agent behind, and the token's life starts here.
    const token = await launch.credential.mint();
    const { identity } = launch;
    const key = attemptKey(identity.task_instance_id, identity.try_number);
    const workdir = join(
      this.opts.workDir,
      `${identity.task_instance_id}-try${identity.try_number}`,
    );
    // A leftover of an earlier dispatch of this try goes the safe way too (never by path as root).
    removeSoon(workdir, this.opts.sandbox?.helper ?? null);
    mkdirSync(workdir, { recursive: true, mode: 0o700 });
    // Per-attempt uids: the agent chowns it to the uid it allocates, right before the task.
    if (this.isolation.mode === 'shared')
      chownSync(workdir, this.isolation.runAs.uid, this.isolation.runAs.gid);

    const standby = this.takeStandby(launch.agentUrl);
    this.poolSize.attemptStarted(standby !== undefined);
    let child: ChildProcess;
    let spawned: Promise<void>;
    if (standby) {
      child = standby.child;
      spawned = Promise.resolve();
      symlinkSync(standby.diagFile, join(this.opts.diagnosticsDir, `${key}.log`));
    } else {
      child = this.spawnAgent(
        launch,
        `${key}.log`,
        {
          LEOFLOW_TASK_INSTANCE_ID: identity.task_instance_id,
          LEOFLOW_WORKDIR: workdir,
        },
        workdir,
      );
      spawned = new Promise((resolve, reject) => {
        child.once('spawn', () => resolve());
        child.once('error', (err) => {
          this.children.delete(key);
          reject(err);
        });
      });
    }
    this.children.set(key, child);
    child.once('exit', (code, signal) => {
      this.children.delete(key);
      if (!this.opts.keepWorkDirs) removeSoon(workdir, this.opts.sandbox?.helper ?? null);
      for (const l of this.listeners) l({ identity, exitCode: code, signal });
    });
    const pipe = child.stdio[3] as NodeJS.WritableStream | null;
    if (!pipe) throw new Error('agent spawn did not provide the credential pipe');
    // A standby agent is already running, so its Register can be done here, on its behalf, and
    // answered on its pipe: nothing but the task's own start is left between the claim and the
    // task. A cold agent registers itself once it has booted.
    const handOff = standby && child.pid !== undefined ? launch.handOff : undefined;
    const sessionKey = handOff ? randomBytes(32).toString('base64url') : undefined;
    // The whole assignment travels on the pipe, so a standby agent learns which attempt it
    // serves (and a cold one is told the same) without anything in env or argv; with its spec,
    // the agent's first call is Register and its next ones fetch only what is secret. It is
    // written before the registration: should this process die once the registration has
    // landed, the agent already holds the token and the session key to register itself.
    pipe.write(
      assignmentPayload(token, identity.task_instance_id, workdir, launch.agentSpec, sessionKey),
    );
    if (handOff && sessionKey) {
      const answer = await this.registerAtHandOff(handOff, token, child.pid!, sessionKey, identity);
      pipe.end(handOffRegistrationPayload(answer));
    } else {
      pipe.end();
    }
    if (standby) this.refillStandbyLater(launch);
    else this.refillStandby(launch);
    await spawned;
    return { pid: child.pid, hostname: hostname() };
  }

  /**
   * Registers the attempt for the standby agent `pid` with the session key its assignment
   * carries. A registration that could not be made is left to the agent,
   * which then registers itself exactly as a cold agent does; nothing is lost but the round trip.
   */
  private async registerAtHandOff(
    handOff: HandOffRegistration,
    token: string,
    pid: number,
    sessionKey: string,
    identity: AttemptLaunch['identity'],
  ): Promise<RegisterResponse | undefined> {
    try {
      // the standby agent is this build's: it masks delivered secrets in its output
      return await handOff.register(token, {
        hostname: hostname(),
        pid,
        sessionKey,
        masksSecrets: true,
      });
    } catch (err) {
      this.opts.logger.warn(
        {
          code: 'LF_HANDOFF_REGISTER_FAILED',
          task_instance_id: identity.task_instance_id,
          try_number: identity.try_number,
          reason: err instanceof Error ? err.constructor.name : typeof err,
        },
        'could not register the attempt at hand-off; its standby agent registers itself',
      );
      return undefined;
    }
  }

  /**
   * Agents are detached and outlive a crashed control plane. A recorded agent is alive when its
   * pid exists on this host, is not a zombie, and runs this executor's agent entry (a reused pid
   * running anything else is not it).
   */
  probeClaim(claim: PendingClaim): ClaimProbe {
    return { state: this.probePid(claim.hostname, claim.pid) };
  }

  private probePid(host: string | null, pid: number | null): 'alive' | 'gone' | 'unknown' {
    if (pid === null || pid <= 0) return 'gone';
    if (host !== null && host !== hostname()) return 'unknown';
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
      if (state === 'Z' || state === 'X') return 'gone';
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return argv.includes(this.opts.agentEntry) ? 'alive' : 'gone';
    } catch {
      return 'gone';
    }
  }

  /** Pre-start standby agents for this agent URL (called once the RPC server listens). */
  warm(target: { agentUrl: string; heartbeatIntervalMs: number }): void {
    this.refillStandby(target);
  }

  /** Past the pool's target: the newest idle agents are told to exit (an empty assignment). */
  private releaseExtraStandby(): void {
    while (this.standby.length > this.poolSize.target) {
      const s = this.standby.pop()!;
      (s.child.stdio[3] as NodeJS.WritableStream | null)?.end();
    }
  }

  private takeStandby(agentUrl: string): StandbyAgent | undefined {
    while (this.standby.length > 0) {
      const s = this.standby.shift()!;
      if (s.agentUrl === agentUrl && s.child.exitCode === null && s.child.signalCode === null)
        return s;
      s.child.kill('SIGTERM');
    }
    return undefined;
  }

  private refillStandbyLater(
    launch: Pick<AttemptLaunch, 'agentUrl' | 'heartbeatIntervalMs'>,
  ): void {
    const delay = this.opts.standbyRefillDelayMs ?? STANDBY_REFILL_DELAY_MS;
    setTimeout(() => this.refillStandby(launch), delay).unref();
  }

  private refillStandby(launch: Pick<AttemptLaunch, 'agentUrl' | 'heartbeatIntervalMs'>): void {
    if (this.closed) return;
    while (this.standby.length < this.poolSize.target) {
      const diagName = `standby-${randomUUID()}.log`;
      const child = this.spawnAgent(
        launch,
        diagName,
        { LEOFLOW_AGENT_STANDBY: '1' },
        this.opts.workDir,
      );
      const entry: StandbyAgent = {
        child,
        agentUrl: launch.agentUrl,
        diagFile: join(this.opts.diagnosticsDir, diagName),
      };
      child.once('error', () => this.dropStandby(entry));
      child.once('exit', () => this.dropStandby(entry));
      this.standby.push(entry);
    }
  }

  private dropStandby(entry: StandbyAgent): void {
    const i = this.standby.indexOf(entry);
    if (i >= 0) this.standby.splice(i, 1);
  }

  /** Minimal env: the control plane's own settings and secrets never reach an agent. */
  private spawnAgent(
    launch: Pick<AttemptLaunch, 'agentUrl' | 'heartbeatIntervalMs'>,
    diagName: string,
    extraEnv: Record<string, string>,
    cwd: string,
  ): ChildProcess {
    const env: Record<string, string> = {};
    for (const name of INHERITED_ENV) {
      const v = process.env[name];
      if (v !== undefined) env[name] = v;
    }
    env.LEOFLOW_AGENT_URL = launch.agentUrl;
    env.LEOFLOW_HEARTBEAT_INTERVAL_MS = String(launch.heartbeatIntervalMs);
    if (this.opts.agentCaFile) env.NODE_EXTRA_CA_CERTS = this.opts.agentCaFile;
    if (this.opts.taskNodeModules) env.LEOFLOW_NODE_MODULES = this.opts.taskNodeModules;
    if (this.opts.taskPythonPath) env.LEOFLOW_PYTHON_SDK = this.opts.taskPythonPath;
    if (this.opts.sandbox) Object.assign(env, this.opts.sandbox.env);
    // The test-only swap hook of the sandbox helper's removals (test/security/sandbox-*.test.ts)
    // reaches the agents' helpers only when a test armed it exactly so.
    if (process.env.LEOFLOW_TEST_FAULT_ARM === 'swap-subdir-for-symlink') {
      env.LEOFLOW_TEST_FAULT_ARM = 'swap-subdir-for-symlink';
      env.LEOFLOW_TEST_REMOVE_SWAP = process.env.LEOFLOW_TEST_REMOVE_SWAP ?? '';
    }
    const iso = this.isolation;
    if (iso.mode === 'per-attempt') {
      env.LEOFLOW_ATTEMPT_UID_RANGE = `${iso.range.first}-${iso.range.last}`;
      env.LEOFLOW_ATTEMPT_NPROC_LIMIT = String(iso.nprocLimit);
      // tests point concurrent installations at a private lock dir; production uses the default
      const lockDir = process.env.LEOFLOW_ATTEMPT_UID_LOCK_DIR;
      if (lockDir) env.LEOFLOW_ATTEMPT_UID_LOCK_DIR = lockDir;
    } else if (iso.mode === 'shared') {
      env.LEOFLOW_RUN_AS_UID = String(iso.runAs.uid);
      env.LEOFLOW_RUN_AS_GID = String(iso.runAs.gid);
    }
    Object.assign(env, extraEnv);
    const diag = openSync(join(this.opts.diagnosticsDir, diagName), 'a', 0o600);
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, [this.opts.agentEntry], {
        env,
        cwd,
        // Own process group: a Ctrl-C aimed at the control plane's terminal does not reach
        // agents, and a crashed control plane leaves them running to report when it returns.
        detached: true,
        stdio: ['ignore', diag, diag, 'pipe'],
      });
    } finally {
      closeSync(diag);
    }
    const pipe = child.stdio[3] as NodeJS.WritableStream | null;
    pipe?.on('error', () => {
      // The agent died before reading its pipe; its exit is reported separately.
    });
    child.unref();
    return child;
  }

  terminate(taskInstanceId: string, tryNumber: number): Promise<void> {
    const child = this.children.get(attemptKey(taskInstanceId, tryNumber));
    if (child?.pid !== undefined) {
      try {
        process.kill(child.pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    return Promise.resolve();
  }

  onAgentExit(listener: (exit: AgentExit) => void): void {
    this.listeners.push(listener);
  }

  running(): number {
    return this.children.size;
  }

  /**
   * Agents are detached: forgetting them leaves them running, heartbeating to whichever replica
   * the agent URL reaches. Standby agents hold no attempt and are told to exit.
   */
  release(): Promise<void> {
    this.closed = true;
    for (const s of this.standby.splice(0))
      (s.child.stdio[3] as NodeJS.WritableStream | null)?.end();
    this.children.clear();
    return Promise.resolve();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.settleTimer);
    // Standby agents hold nothing; an empty assignment tells them to exit.
    for (const s of this.standby.splice(0))
      (s.child.stdio[3] as NodeJS.WritableStream | null)?.end();
    const exits = [...this.children.values()].map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', () => resolve());
          try {
            if (c.pid !== undefined) process.kill(c.pid, 'SIGTERM');
          } catch {
            resolve();
          }
        }),
    );
    // Bounded, and the bound must not outlive the wait: a pending timer would hold the process
    // open for its whole 10 s after everything else closed.
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(exits), new Promise((r) => (bound = setTimeout(r, 10_000)))]);
    clearTimeout(bound);
  }
}

interface StandbyAgent {
  child: ChildProcess;
  agentUrl: string;
  diagFile: string;
}

/**
 * A spec whose encoding is larger than this stays off the pipe (the agent then asks
 * GetTaskSpec): the agent reads at most 1 MiB there, and a script that big gains nothing from
 * skipping one round trip.
 */
export const MAX_PIPED_SPEC_BYTES = 512 * 1024;

/**
 * Register's answer larger than this (a permissive tenant's whole vault, say) goes on the pipe
 * without its prefetch, which the agent then asks for with each part's own call: with the spec's
 * budget it keeps the assignment under the 1 MiB the agent reads.
 */
export const MAX_PIPED_REGISTRATION_BYTES = 384 * 1024;

/** The JSON the agent reads from fd 3 (docs/agent.md, "Standby agents"). */
export function assignmentPayload(
  token: string,
  taskInstanceId: string,
  workdir: string,
  spec: TaskSpec | undefined,
  handOffSessionKey?: string,
): string {
  const assignment: Record<string, string> = { token, task_instance_id: taskInstanceId, workdir };
  if (spec) {
    // The protobuf binary form, as GetTaskSpec would carry it: one decoder on the agent's side.
    const encoded = Buffer.from(toBinary(TaskSpecSchema, spec)).toString('base64');
    if (encoded.length <= MAX_PIPED_SPEC_BYTES) assignment.spec = encoded;
  }
  if (handOffSessionKey) {
    // the registration comes next (handOffRegistrationPayload), bound to this key
    assignment.registration = 'follows';
    assignment.session_key = handOffSessionKey;
  }
  // The newline ends the message: the agent starts on it, not on this end's close (token.ts).
  return `${JSON.stringify(assignment)}\n`;
}

/**
 * The hand-off's second message (docs/agent.md, "Standby agents"): Register's answer, or word
 * that the agent must register itself.
 */
export function handOffRegistrationPayload(answer: RegisterResponse | undefined): string {
  const message = answer ? { registered: encodeRegistration(answer) } : { register: 'self' };
  return `${JSON.stringify(message)}\n`;
}

function encodeRegistration(answer: RegisterResponse): string {
  const encoded = Buffer.from(toBinary(RegisterResponseSchema, answer)).toString('base64');
  if (encoded.length <= MAX_PIPED_REGISTRATION_BYTES || !answer.prefetch) return encoded;
  const { prefetch: _dropped, ...rest } = answer;
  return Buffer.from(
    toBinary(RegisterResponseSchema, create(RegisterResponseSchema, rest)),
  ).toString('base64');
}

function attemptKey(taskInstanceId: string, tryNumber: number): string {
  return `${taskInstanceId}-try${tryNumber}`;
}

/**
 * Removes a finished attempt's work dir off the event loop: a synchronous recursive delete
 * stalled the loop for milliseconds right while the downstream's agent was registering. It is
 * renamed first (one syscall, inside the root-owned work root), so a re-dispatch of the same try
 * that makes the same directory again can never have its fresh dir deleted by this removal. The
 * delete itself never follows a link (removeWorkDir: the task could have written the tree).
 */
function removeSoon(workdir: string, helper: string | null): void {
  const doomed = `${workdir}.removing-${randomUUID()}`;
  try {
    renameSync(workdir, doomed);
  } catch {
    return; // already gone (the agent never got one, or a test removed it)
  }
  void removeWorkDir(doomed, helper);
}
