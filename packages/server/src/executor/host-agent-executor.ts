import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { isActive } from '@leoflow/core';
import type { Logger } from 'pino';
import type { AttemptIdentity } from '../auth/agent-token.js';
import type { AttemptLaunch } from '../attempts/attempt-launch.js';
import type { AgentExit } from '../attempts/attempt-lifecycle.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type { AssignmentBroker } from './assignments/assignment-broker.js';
import type { ClaimProbe, Executor, ExecutorPosture, PendingClaim } from './executor.js';
import { RunnerExecutor } from './runner-executor.js';
import type { TaskIsolation } from './run-as-user.js';

/** Who the host agent's session is, as the cell session server and AwaitAssignment see it. */
export interface HostAgentSession {
  runner_id: string;
  tenant_id: string;
}

export interface HostAgentExecutorOptions {
  /** the agent's bundle (`leoflow-agent.mjs`); the host agent is its runner mode */
  agentEntry: string;
  /** the work root: each attempt gets a 0700 dir under it */
  workDir: string;
  /** the data dir (0700): the socket, the pid file and the agent's diagnostics go here */
  dataDir: string;
  isolation: TaskIsolation;
  /** the attempt sandbox as boot decided it (sandboxAgentEnv) */
  sandbox?: { env: Record<string, string> };
  /** node_modules node tasks resolve packages from (the SDK copy); null = none */
  taskNodeModules: string | null;
  /** the Python SDK's read-only copy python tasks import (LEOFLOW_PYTHON_SDK) */
  taskPythonPath?: string | null;
  /** attempts the host agent runs at once */
  slots: number;
  /** the host executor's own broker (never the runners'): only the host agent's stream takes from it */
  broker: AssignmentBroker;
  store: Pick<TaskInstanceStore, 'getAttemptFence'>;
  /** the tenant the session is recorded under (it serves every tenant: anyTenant) */
  tenantId: string;
  logger: Logger;
  /** wait before a dead host agent is started again (default 500 ms, doubling to 10 s) */
  restartDelayMs?: number;
}

/** The only variables the host agent inherits: the control plane's own settings never reach it. */
const INHERITED_ENV = ['PATH', 'LANG', 'LC_ALL', 'TZ'];

export const HOST_AGENT_SOCKET = 'host-agent.sock';
export const HOST_AGENT_PID_FILE = 'host-agent.pid';
export const HOST_AGENT_LOG = 'host-agent.log';

/**
 * Lite's host agent (execution.host_agent on; docs/run-loop.md, "The host agent"): one
 * long-lived agent process, started and supervised here, takes every local attempt and runs each
 * in its own sandbox under its own uid, token, session key and RPC session. It is the runner
 * daemon's code (`--host-socket`), so this executor is a local runner: attempts wait in a broker
 * of its own, and the host agent's stream (on a unix socket in the 0700 data dir) takes them.
 *
 * It is detached: a control plane that dies leaves it, and its tasks, running; the successor
 * finds it by the pid file and serves its reconnecting session. A host agent that dies is
 * started again; the new one first kills what its predecessor's uids still run (it reclaims
 * them), then connects, and only then are the attempts the dead one held ended here
 * (LF_HOST_AGENT_LOST) and retried as their policy says: never two of one task at once.
 */
export class HostAgentExecutor implements Executor {
  static readonly tokenTransport =
    "in-band on the host agent's session (a unix socket in the data dir), memory only";
  readonly name = 'subprocess';
  readonly posture: ExecutorPosture = { tokenTransport: HostAgentExecutor.tokenTransport };
  /** the session's identity: a runner id of this process alone, never a directory id */
  readonly session: HostAgentSession;
  readonly #o: HostAgentExecutorOptions;
  readonly #runner: RunnerExecutor;
  readonly #listeners: Array<(exit: AgentExit) => void> = [];
  /** attempts handed to this executor, until the store says they ended */
  readonly #attempts = new Map<string, AttemptIdentity & { dispatch_gen: number }>();
  readonly #socketPath: string;
  readonly #pidFile: string;
  #serve: ((who: HostAgentSession, stream: Duplex) => void) | null = null;
  #server: Server | null = null;
  readonly #sockets = new Set<Socket>();
  #child: ChildProcess | null = null;
  #adoptedPid: number | null = null;
  #watch: NodeJS.Timeout | null = null;
  #restartTimer: NodeJS.Timeout | null = null;
  #reconcileTimer: NodeJS.Timeout | null = null;
  #reconciling = false;
  #restarts = 0;
  #started = false;
  #closed = false;
  /** attempts a dead host agent held: ended once its successor has connected (it reclaimed their uids) */
  #orphans: Array<AttemptIdentity & { dispatch_gen: number }> | null = null;

  constructor(o: HostAgentExecutorOptions) {
    if (o.isolation.mode === 'shared') {
      throw new Error(
        'execution.host_agent on runs each attempt under a uid of its own (or, not root, as the user): a shared execution.run_as_user is not supported; set --attempt-uid-range or --host-agent off',
      );
    }
    this.#o = o;
    this.session = {
      runner_id: `host_${randomBytes(12).toString('base64url')}`,
      tenant_id: o.tenantId,
    };
    this.#socketPath = join(o.dataDir, HOST_AGENT_SOCKET);
    this.#pidFile = join(o.dataDir, HOST_AGENT_PID_FILE);
    this.#runner = new RunnerExecutor({
      broker: o.broker,
      store: o.store,
      // driven by this executor's own timer (warm), which also forgets ended attempts
      reconcileIntervalMs: 0,
      onError: (err) => o.logger.error({ err }, 'host agent attempt reconcile failed'),
    });
    this.#runner.onAgentExit((exit) => this.#emit(exit));
  }

  /** the broker its attempts wait in (AwaitAssignment of the host session takes from it) */
  get broker(): AssignmentBroker {
    return this.#o.broker;
  }

  /** The pid of the host agent this executor supervises now (its child, or one it adopted). */
  get agentPid(): number | null {
    return this.#child?.pid ?? this.#adoptedPid;
  }

  /** Serves the host agent's sessions with the agent service (called once it exists). */
  serveOn(serve: (who: HostAgentSession, stream: Duplex) => void): void {
    this.#serve = serve;
  }

  /** Once the agent service can answer: listen on the socket and start (or adopt) the agent. */
  warm(): void {
    if (this.#started || this.#closed) return;
    this.#started = true;
    this.#reconcileTimer = setInterval(
      () =>
        void this.reconcile().catch((err: unknown) =>
          this.#o.logger.error({ err }, 'host agent attempt reconcile failed'),
        ),
      1_000,
    );
    this.#reconcileTimer.unref();
    this.#listen();
    this.#ensureAgent();
  }

  start(launch: AttemptLaunch): Promise<void> {
    const id = { ...launch.identity, dispatch_gen: launch.identity.dispatch_gen ?? 0 };
    this.#attempts.set(key(id.task_instance_id, id.try_number), id);
    return this.#runner.start(launch).then(() => undefined);
  }

  probeClaim(claim: PendingClaim, now: number): ClaimProbe {
    return this.#runner.probeClaim(claim, now);
  }

  terminate(taskInstanceId: string, tryNumber: number): Promise<void> {
    return this.#runner.terminate(taskInstanceId, tryNumber);
  }

  onAgentExit(listener: (exit: AgentExit) => void): void {
    this.#listeners.push(listener);
  }

  running(): number {
    return this.#runner.running();
  }

  /** Frees ended attempts' slots and forgets ended attempts (the runner executor's reconcile). */
  async reconcile(): Promise<void> {
    if (this.#reconciling) return;
    this.#reconciling = true;
    try {
      await this.#runner.reconcile();
      for (const [k, id] of this.#attempts) {
        const fence = await this.#o.store.getAttemptFence(id.task_instance_id);
        if (!fence || fence.try_number !== id.try_number || !isActive(fence.state)) {
          this.#attempts.delete(k);
        }
      }
    } finally {
      this.#reconciling = false;
    }
  }

  /**
   * Lite stops: the host agent is told to stop (SIGTERM: its tasks are stopped and it reports),
   * and waited for up to 10 s.
   */
  async close(): Promise<void> {
    this.#closed = true;
    this.#stopTimers();
    const pid = this.agentPid;
    const child = this.#child;
    if (pid !== null) {
      const gone = child
        ? new Promise<void>((r) =>
            child.exitCode !== null || child.signalCode !== null
              ? r()
              : child.once('exit', () => r()),
          )
        : waitForPidGone(pid, 10_000);
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // already gone
      }
      let bound: NodeJS.Timeout | undefined;
      await Promise.race([gone, new Promise((r) => (bound = setTimeout(r, 10_000)))]);
      clearTimeout(bound);
      rmSync(this.#pidFile, { force: true });
    }
    this.#closeServer();
    await this.#runner.close();
  }

  /** A draining control plane leaves the host agent and its attempts running. */
  async release(): Promise<void> {
    this.#closed = true;
    this.#stopTimers();
    this.#closeServer();
    await this.#runner.release();
  }

  #stopTimers(): void {
    if (this.#watch) clearInterval(this.#watch);
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    if (this.#reconcileTimer) clearInterval(this.#reconcileTimer);
    this.#reconcileTimer = null;
    this.#watch = null;
    this.#restartTimer = null;
  }

  #closeServer(): void {
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    this.#server?.close();
    this.#server = null;
  }

  #listen(): void {
    // A predecessor's socket file: nobody listens on it any more (we hold the data dir).
    rmSync(this.#socketPath, { force: true });
    const server = createServer((socket) => this.#accept(socket));
    server.on('error', (err) =>
      this.#o.logger.error({ err, code: 'LF_HOST_AGENT_LOST' }, 'the host agent socket failed'),
    );
    // The data dir is 0700 already; the socket itself is the control plane user's alone too.
    server.listen(this.#socketPath, () => chmodSync(this.#socketPath, 0o600));
    this.#server = server;
  }

  #accept(socket: Socket): void {
    if (!this.#serve || this.#closed) {
      socket.destroy();
      return;
    }
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
    this.#serve(this.session, socket);
    // The host agent that connects after a death has reclaimed its predecessor's uids (killed
    // their processes) before dialling: the dead one's attempts can end now, without overlap.
    const orphans = this.#orphans;
    if (orphans && this.#child !== null) {
      this.#orphans = null;
      void this.#endOrphans(orphans);
    }
  }

  /** Adopts a live host agent a predecessor started (pid file), else starts one. */
  #ensureAgent(): void {
    if (this.#closed) return;
    const recorded = readPidFile(this.#pidFile);
    if (recorded !== null && isHostAgent(recorded, this.#o.agentEntry, this.#socketPath)) {
      this.#adoptedPid = recorded;
      this.#o.logger.info({ pid: recorded }, 'host agent adopted (started by a predecessor)');
      this.#watch = setInterval(() => {
        if (isHostAgent(recorded, this.#o.agentEntry, this.#socketPath)) return;
        if (this.#watch) clearInterval(this.#watch);
        this.#watch = null;
        this.#adoptedPid = null;
        this.#died(recorded, null, null);
      }, 500);
      this.#watch.unref();
      return;
    }
    this.#spawn();
  }

  #spawn(): void {
    const o = this.#o;
    const env: Record<string, string> = {};
    for (const name of INHERITED_ENV) {
      const v = process.env[name];
      if (v !== undefined) env[name] = v;
    }
    if (o.taskNodeModules) env.LEOFLOW_NODE_MODULES = o.taskNodeModules;
    if (o.taskPythonPath) env.LEOFLOW_PYTHON_SDK = o.taskPythonPath;
    if (o.sandbox) Object.assign(env, o.sandbox.env);
    const args = [
      o.agentEntry,
      '--runner',
      '--host-socket',
      this.#socketPath,
      '--work-dir',
      o.workDir,
      '--max-attempts',
      String(o.slots),
    ];
    if (o.isolation.mode === 'per-attempt') {
      const iso = o.isolation;
      args.push('--attempt-uid-range', `${iso.range.first}-${iso.range.last}`);
      env.LEOFLOW_ATTEMPT_NPROC_LIMIT = String(iso.nprocLimit);
      // tests point concurrent installations at a private lock dir; production uses the default
      const lockDir = process.env.LEOFLOW_ATTEMPT_UID_LOCK_DIR;
      if (lockDir) env.LEOFLOW_ATTEMPT_UID_LOCK_DIR = lockDir;
    } else {
      args.push('--attempt-uid-range', 'off');
    }
    mkdirSync(join(o.dataDir, 'agents'), { recursive: true, mode: 0o700 });
    const diag = openSync(join(o.dataDir, 'agents', HOST_AGENT_LOG), 'a', 0o600);
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, args, {
        env,
        cwd: o.workDir,
        // Its own process group, and it outlives a control plane that dies (reports survive).
        detached: true,
        stdio: ['ignore', diag, diag],
      });
    } finally {
      closeSync(diag);
    }
    child.unref();
    this.#child = child;
    child.once('spawn', () => {
      if (child.pid !== undefined) writeFileSync(this.#pidFile, `${child.pid}\n`, { mode: 0o600 });
      o.logger.info({ pid: child.pid }, 'host agent started');
    });
    child.once('error', (err) => {
      o.logger.error({ err, code: 'LF_HOST_AGENT_LOST' }, 'the host agent could not be started');
      if (this.#child === child) this.#child = null;
      this.#scheduleRestart();
    });
    child.once('exit', (code, signal) => {
      if (this.#child === child) this.#child = null;
      this.#died(child.pid ?? -1, code, signal);
    });
  }

  #died(pid: number, code: number | null, signal: string | null): void {
    if (this.#closed) return;
    const held = [...this.#attempts.values()].filter(
      (id) => this.#o.broker.stateOf(id.task_instance_id, id.try_number) !== 'waiting',
    );
    this.#o.logger.error(
      { code: 'LF_HOST_AGENT_LOST', pid, exit_code: code, signal, attempts: held.length },
      `the host agent (pid ${pid}) exited; starting it again. Its ${held.length} attempt(s) end as lost once the new one has stopped what they left running, and are retried as their policy says`,
    );
    this.#orphans = [...(this.#orphans ?? []), ...held];
    this.#scheduleRestart();
  }

  #scheduleRestart(): void {
    if (this.#closed || this.#restartTimer) return;
    const base = this.#o.restartDelayMs ?? 500;
    const wait = Math.min(10_000, base * 2 ** Math.min(this.#restarts, 5));
    this.#restarts += 1;
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = null;
      this.#spawn();
    }, wait);
    this.#restartTimer.unref();
  }

  /** Ends what a dead host agent held, at the generation the store has (a CAS: never twice). */
  async #endOrphans(orphans: Array<AttemptIdentity & { dispatch_gen: number }>): Promise<void> {
    for (const id of orphans) {
      // Taken again since (its claim reset, or re-dispatched): not the dead agent's any more.
      if (this.#o.broker.stateOf(id.task_instance_id, id.try_number) !== undefined) continue;
      const fence = await this.#o.store.getAttemptFence(id.task_instance_id).catch(() => null);
      if (
        !fence ||
        fence.try_number !== id.try_number ||
        fence.dispatch_gen !== id.dispatch_gen ||
        !isActive(fence.state)
      ) {
        continue;
      }
      this.#emit({
        identity: id,
        exitCode: null,
        signal: null,
        cause: {
          code: 'LF_HOST_AGENT_LOST',
          message:
            'the host agent exited while it ran this attempt; its task was stopped before the attempt ended, and it is retried as its policy says',
        },
      });
    }
    this.#restarts = 0;
  }

  #emit(exit: AgentExit): void {
    for (const l of this.#listeners) l(exit);
  }
}

function key(task_instance_id: string, try_number: number): string {
  return `${task_instance_id}#${try_number}`;
}

function readPidFile(file: string): number | null {
  try {
    const n = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

/** The pid runs this build's agent entry as the host agent of this socket (not a reused pid). */
function isHostAgent(pid: number, agentEntry: string, socketPath: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    if (state === 'Z' || state === 'X') return false;
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return argv.includes(agentEntry) && argv.includes(socketPath);
  } catch {
    return false;
  }
}

async function waitForPidGone(pid: number, maxMs: number): Promise<void> {
  const until = Date.now() + maxMs;
  while (Date.now() < until) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
