import { chownSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  AGENT_PROTOCOL_VERSION,
  ERROR_CODE_METADATA,
  LogStream,
  ReportedState,
  TaskType,
  type RegisterPrefetch,
  type RegisterResponse,
  type TaskSpec,
} from '@leoflow/protocol';
import { SecretMasker } from '@leoflow/core';
import type { AgentConfig } from './config.js';
import type { Diagnostics } from './diag.js';
import type { AttemptIsolation } from './isolation.js';
import type { TaskLauncher } from './sandbox/launcher.js';
import { buildTaskEnv, xcomEnvName, type EnvMap } from './env.js';
import { renderSpecTemplates, TemplateRenderError } from './templates.js';
import { LogShipper, type BufferedLine, type StreamName } from './log-shipper.js';
import { codeName, errorCode, jittered, retryUntil, type RetryOptions } from './retry.js';
import type { AgentClient } from './rpc.js';
import {
  exitCodeOf,
  planLaunch,
  TaskProcess,
  UnsupportedTaskTypeError,
  writeTaskFile,
  type RunAs,
  type TaskExit,
} from './task-process.js';
import type { TokenHolder } from './token.js';

/** The code the server names an ungranted declared secret with (issue 34). */
const SECRET_NOT_GRANTED = 'LF_SECRET_NOT_GRANTED';

/** A declared secret refused as not granted: the attempt fails with the server's sentence. */
class SecretNotGrantedError extends Error {}
import { readSecretReads, SECRET_READS_FILE_NAME } from './secret-reads.js';
import { HeartbeatLoop, realTimers, type HeartbeatTimers } from './heartbeat.js';

export const AGENT_VERSION = '0.1.0';

/** Process exit codes of the agent itself (not of the task). */
export const EXIT = {
  /** the final state was delivered (or the server answered the report with should_terminate) */
  OK: 0,
  /** unexpected agent failure */
  FAILURE: 1,
  /** configuration, token pipe, Register or GetTaskSpec failed within the bootstrap deadline */
  BOOTSTRAP: 2,
  /** the task ran but its final state could not be delivered before the report deadline */
  REPORT_UNDELIVERED: 3,
  /** the control plane said should_terminate on a heartbeat; the task group was killed */
  TERMINATED: 4,
  /**
   * a warm worker found something of its previous attempt alive after the sweep (a process, its
   * work dir): the pod takes no further attempt and the pool recycles it
   */
  RECYCLE: 5,
  /** a warm worker's token was refused on AwaitAssignment: the pool recycles the pod */
  WORKER_REFUSED: 6,
  /** the agent received SIGTERM/SIGINT/SIGHUP */
  SIGNALLED: 143,
} as const;

/** An upstream XCom is also exported as env when it is at most this big and valid UTF-8. */
export const XCOM_ENV_MAX_BYTES = 64 * 1024;

const TYPE_NAMES: Record<number, string> = {
  [TaskType.BASH]: 'bash',
  [TaskType.PYTHON]: 'python',
  [TaskType.NODE]: 'node',
};

const STREAMS: Record<StreamName, LogStream> = {
  stdout: LogStream.STDOUT,
  stderr: LogStream.STDERR,
  agent: LogStream.AGENT,
};

type StopReason =
  | { kind: 'terminate'; reason: string }
  | { kind: 'timeout'; seconds: number }
  | { kind: 'signal'; signal: NodeJS.Signals };

interface Outcome {
  state: ReportedState;
  exitCode: number;
  errorMessage: string;
  timedOut: boolean;
  occurredAtMs: number;
}

export interface AgentDeps {
  config: AgentConfig;
  client: AgentClient;
  tokens: TokenHolder;
  diag: Diagnostics;
  agentEnv: Record<string, string | undefined>;
  /** epoch ms at which the bootstrap deadline started (the process start, normally) */
  startedAt: number;
  /** per-attempt uid (root only): allocated before the task, swept when it ends */
  isolation?: AttemptIsolation | undefined;
  /** the host's sandbox: every task starts through it (docs/security.md, "The sandbox") */
  launcher?: TaskLauncher | undefined;
  /** the heartbeat loop's clock and timer (default: the real ones) */
  timers?: HeartbeatTimers;
  /**
   * The spec the executor handed over with the token (docs/agent.md, "Standby agents"): the
   * agent then does not call GetTaskSpec. Register still comes first and still decides.
   */
  assignedSpec?: TaskSpec;
  /**
   * Register's answer, when the executor registered the attempt for this agent at hand-off
   * (docs/agent.md, "Standby agents"): the agent then makes no Register call and takes this
   * answer exactly as if its own Register had returned it.
   */
  registeredAtHandOff?: RegisterResponse;
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Short exponential backoff for the pre-task calls; the bootstrap deadline bounds the total. */
const bootstrapBackoff = (attempt: number): number => jittered(Math.min(250 * 2 ** attempt, 5_000));

/**
 * One task attempt, start to finish. Order of the steps is the contract in docs/agent.md:
 * register → spec → secrets → upstream XComs → env → spawn → heartbeat/timeout → report.
 */
export class Agent {
  readonly #cfg: AgentConfig;
  readonly #client: AgentClient;
  readonly #tokens: TokenHolder;
  /** where the SDK notes the names it read (D5); undefined until the env is built */
  #secretReadsFile: string | undefined;
  readonly #diag: Diagnostics;
  readonly #agentEnv: Record<string, string | undefined>;
  readonly #startedAt: number;
  readonly #isolation: AttemptIsolation | undefined;
  readonly #launcher: TaskLauncher | undefined;
  /** the root-only record of the task's exit status (the sandbox's reaper writes it) */
  #statusFile: string | undefined;
  readonly #assignedSpec: TaskSpec | undefined;
  readonly #registeredAtHandOff: RegisterResponse | undefined;
  /** what Register answered for the attempt's preparation (unset parts are fetched) */
  #prefetch: RegisterPrefetch | undefined;

  #shipper: LogShipper | undefined;
  /** the shipper's buffer is past its high-water mark: the task's output is not read */
  #outputBlocked = false;
  #task: TaskProcess | undefined;
  #stop: StopReason | undefined;
  #killing: Promise<void> | undefined;
  #heartbeats: HeartbeatLoop | undefined;
  readonly #timers: HeartbeatTimers;
  #heartbeatIntervalMs: number;
  #lastStdout: string | undefined;
  /**
   * Built once the attempt's secrets are in (issue 34): every task output line, and so the XCom
   * value taken from the last stdout line, goes through it before it leaves the agent.
   */
  #masker: SecretMasker | undefined;
  /** After a signal, no retry may wait past this point (epoch ms). */
  #cutoff = Number.POSITIVE_INFINITY;
  /**
   * The agent's own cancellation of its calls: aborted only when the signal cutoff passes. A
   * `Canceled` failure while this is not aborted came from the transport and is retried.
   */
  readonly #calls = new AbortController();
  #cutoffTimer: NodeJS.Timeout | undefined;
  #bootstrapDeadline = 0;

  constructor(deps: AgentDeps) {
    this.#cfg = deps.config;
    this.#client = deps.client;
    this.#tokens = deps.tokens;
    this.#diag = deps.diag;
    this.#agentEnv = deps.agentEnv;
    this.#startedAt = deps.startedAt;
    this.#isolation = deps.isolation;
    this.#launcher = deps.launcher;
    this.#assignedSpec = deps.assignedSpec;
    this.#registeredAtHandOff = deps.registeredAtHandOff;
    this.#timers = deps.timers ?? realTimers;
    this.#heartbeatIntervalMs = deps.config.heartbeatIntervalMs;
  }

  /** Whether a task process has been started (signals before that just end the agent). */
  get taskStarted(): boolean {
    return this.#task !== undefined;
  }

  /** Last-resort cleanup for crashes: the task group must not outlive the agent. */
  killTaskGroupNow(): void {
    this.#isolation?.killNow();
    const pid = this.#task?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }

  onSignal(signal: NodeJS.Signals): void {
    this.#diag.log('warn', `received ${signal}`);
    // Whatever phase we are in, the executor wants us gone soon: bound every remaining retry.
    this.#cutoff = Math.min(this.#cutoff, Date.now() + this.#cfg.killGraceMs + 3_000);
    clearTimeout(this.#cutoffTimer);
    // At the cutoff the agent gives up on calls still in flight: that cancel is its own.
    this.#cutoffTimer = setTimeout(() => this.#calls.abort(), this.#cutoff - Date.now());
    this.#cutoffTimer.unref();
    if (this.#stop === undefined) this.#stop = { kind: 'signal', signal };
    if (this.#task) {
      this.#agentLine(`agent received ${signal}; terminating the task process group`);
      void this.#killGroup();
    }
  }

  /**
   * The attempt in its phases, in the order docs/agent.md gives: bootstrap (Register, the spec),
   * preparation (secrets, upstream XComs, env, the launch plan), the task's run, and the report.
   * Each phase returns the agent's exit code when the attempt ends there.
   */
  async run(): Promise<number> {
    const acquiring = this.#acquireUidMeanwhile();
    // awaited in the preparation step, which reports a failure as the attempt's
    acquiring.catch(() => undefined);
    const spec = await this.#bootstrap(acquiring);
    if (typeof spec === 'number') return spec;
    this.#startShipper();
    const prepared = await this.#prepare(spec, acquiring);
    if (typeof prepared === 'number') return prepared;
    return this.#runTask(spec, prepared);
  }

  /** Register (or the hand-off's answer) and the spec, bounded by the bootstrap deadline. */
  async #bootstrap(acquiring: Promise<RunAs | undefined>): Promise<TaskSpec | number> {
    const bootstrapDeadline = this.#startedAt + this.#cfg.bootstrapDeadlineMs;
    this.#bootstrapDeadline = bootstrapDeadline;
    let spec: TaskSpec;
    const handedOver = this.#registeredAtHandOff;
    const registering = handedOver
      ? Promise.resolve(handedOver)
      : this.#register(bootstrapDeadline);
    try {
      const reg = await registering;
      if (reg.shouldTerminate) {
        // The attempt was superseded or finished before this agent started: run nothing.
        throw new Error(`the server says stop before starting: ${reg.terminateReason}`);
      }
      if (!this.#cfg.heartbeatIntervalFromEnv && reg.heartbeatIntervalSeconds > 0) {
        this.#heartbeatIntervalMs = reg.heartbeatIntervalSeconds * 1000;
      }
      this.#prefetch = reg.prefetch;
      const prefetchedSpec = reg.prefetch?.spec?.spec;
      if (this.#assignedSpec) {
        spec = this.#assignedSpec;
      } else if (prefetchedSpec) {
        spec = prefetchedSpec;
      } else {
        const res = await this.#bootstrapCall('GetTaskSpec', bootstrapDeadline, () =>
          this.#client.getTaskSpec({}, { timeoutMs: this.#callTimeout(bootstrapDeadline) }),
        );
        if (!res.spec) throw new Error('GetTaskSpec returned no spec');
        spec = res.spec;
      }
    } catch (err) {
      this.#diag.log(
        'error',
        `bootstrap failed: ${err instanceof Error ? err.message : String(err)}`,
      );
      // settled before returning, so the caller's isolation.end() releases a uid taken meanwhile
      await acquiring.catch(() => undefined);
      return EXIT.BOOTSTRAP;
    }
    if (this.#stop) {
      await acquiring.catch(() => undefined);
      return EXIT.SIGNALLED;
    }
    if (spec.taskInstanceId !== '' && spec.taskInstanceId !== this.#cfg.taskInstanceId) {
      // The token decides which attempt this is; the env value is only a label for diagnostics.
      this.#diag.log(
        'warn',
        `spec is for task instance ${spec.taskInstanceId}, env says ${this.#cfg.taskInstanceId}`,
      );
    }
    this.#diag.log(
      'info',
      `task ${spec.dagId}/${spec.runId}/${spec.taskId} try ${spec.tryNumber} (${TYPE_NAMES[spec.type] ?? spec.type})`,
    );
    return spec;
  }

  /** The log shipper, which pauses the task's output while its buffer is full. */
  #startShipper(): void {
    const shipper = new LogShipper({
      push: (lines) => this.#pushLogs(lines),
      diag: this.#diag,
      onPressure: (blocked) => {
        this.#outputBlocked = blocked;
        if (blocked) this.#task?.pauseOutput();
        else this.#task?.resumeOutput();
      },
    });
    this.#shipper = shipper;
    shipper.start();
  }

  /** Secrets, upstream XComs, the task's env and its launch plan; a failure fails the attempt. */
  async #prepare(
    spec: TaskSpec,
    acquiring: Promise<RunAs | undefined>,
  ): Promise<
    { launch: ReturnType<typeof planLaunch>; env: EnvMap; runAs: RunAs | undefined } | number
  > {
    const workdir = this.#cfg.workdir;
    let runAs = this.#cfg.runAs;
    const asRoot = process.getuid?.() === 0;
    let launch: ReturnType<typeof planLaunch>;
    let env: EnvMap;
    try {
      if (this.#isolation) {
        runAs = await acquiring;
        const nproc = this.#isolation.nprocProblem();
        if (nproc !== undefined) this.#diag.log('warn', nproc);
      }
      if (runAs && asRoot) {
        // The task's cwd and HOME; it must be able to write there and nobody else should.
        chownSync(workdir, runAs.uid, runAs.gid);
      }
      const xcomDir = path.join(workdir, 'xcom');
      this.#secretReadsFile = path.join(workdir, SECRET_READS_FILE_NAME);
      // Each fetch stands alone, so they share one round trip.
      const prefetched = this.#prefetch;
      const [variables, connections, xcomEnv] = await Promise.all([
        this.#fetchSecrets(
          'variables',
          prefetched?.variables?.variables,
          prefetched && {
            message: prefetched.variablesRefused,
            code: prefetched.variablesRefusedCode,
          },
          async () => (await this.#client.getVariables({}, this.#quickOpts())).variables,
        ),
        this.#fetchSecrets(
          'connections',
          prefetched?.connections?.connectionUris,
          prefetched && {
            message: prefetched.connectionsRefused,
            code: prefetched.connectionsRefusedCode,
          },
          async () => (await this.#client.getConnections({}, this.#quickOpts())).connectionUris,
        ),
        this.#fetchUpstreamXComs(spec, xcomDir, runAs && asRoot ? runAs : undefined),
      ]);
      // the values now live only in the task's env, as when each part came on its own call
      this.#prefetch = undefined;
      this.#masker = SecretMasker.forDelivery({
        variables: variables ?? {},
        connections: connections ?? {},
      });
      // {{ … }} in the bash command and env values, from the run context and what was delivered
      const rendered = renderSpecTemplates(spec, variables, connections);
      const built = buildTaskEnv({
        agentEnv: this.#agentEnv,
        spec: { ...spec, env: rendered.env },
        workdir,
        xcomDir,
        xcomEnv,
        variables,
        connections,
        secretReadsFile: this.#secretReadsFile,
      });
      env = built.env;
      // `import leoflow` without installing anything: the SDK's read-only copy comes first
      const pythonSdk = spec.type === TaskType.PYTHON ? this.#cfg.pythonSdk : undefined;
      if (pythonSdk !== undefined) {
        env['PYTHONPATH'] = env['PYTHONPATH'] ? `${pythonSdk}:${env['PYTHONPATH']}` : pythonSdk;
      }
      if (built.dropped.length > 0) {
        this.#agentLine(`not exported (NUL byte or '=' in name): ${built.dropped.join(', ')}`);
      }
      launch = planLaunch(spec.type, rendered.command, {
        workdir,
        env,
        runAs: runAs && asRoot ? runAs : undefined,
        python: this.#cfg.python,
        node: this.#cfg.node,
        nodeModules: this.#cfg.nodeModules,
      });
      if (this.#launcher) {
        this.#statusFile = this.#launcher.statusFileFor(
          `${spec.taskInstanceId || this.#cfg.taskInstanceId}-try${spec.tryNumber}`,
        );
        launch = this.#launcher.wrap(launch, {
          workdir,
          runAs: runAs && asRoot ? runAs : undefined,
          nproc: this.#isolation?.nproc ?? 0,
          graceMs: this.#cfg.killGraceMs,
          statusFile: this.#statusFile,
          pathVar: env['PATH'],
          readOnly:
            spec.type === TaskType.NODE && this.#cfg.nodeModules
              ? [this.#cfg.nodeModules]
              : pythonSdk !== undefined
                ? [pythonSdk]
                : [],
        });
      } else if (this.#isolation) launch = this.#isolation.wrap(launch);
    } catch (err) {
      const msg =
        err instanceof UnsupportedTaskTypeError ||
        err instanceof SecretNotGrantedError ||
        err instanceof TemplateRenderError
          ? err.message
          : `could not prepare the task: ${err instanceof Error ? err.message : String(err)}`;
      this.#agentLine(msg);
      this.#diag.log('error', msg);
      return this.#finish({
        state: ReportedState.FAILED,
        exitCode: 1,
        errorMessage: msg,
        timedOut: false,
        occurredAtMs: Date.now(),
      });
    }
    if (this.#stop) return EXIT.SIGNALLED;
    return { launch, env, runAs };
  }

  /** Spawns the task, heartbeats and times it, reaps its group, and reports how it ended. */
  async #runTask(
    spec: TaskSpec,
    {
      launch,
      env,
      runAs,
    }: { launch: ReturnType<typeof planLaunch>; env: EnvMap; runAs: RunAs | undefined },
  ): Promise<number> {
    const shipper = this.#shipper!;
    const workdir = this.#cfg.workdir;
    const task = new TaskProcess({
      plan: launch,
      workdir,
      env,
      runAs,
      onLine: (stream, raw) => {
        const line = this.#masker ? this.#masker.mask(raw) : raw;
        shipper.add(stream, line);
        if (stream === 'stdout' && line.trim() !== '') this.#lastStdout = line;
      },
    });
    this.#task = task;
    if (this.#outputBlocked) task.pauseOutput();
    this.#agentLine(
      `started ${TYPE_NAMES[spec.type] ?? 'task'} process ${task.pid ?? '(spawn failed)'}` +
        (runAs ? ` as uid ${runAs.uid} gid ${runAs.gid}` : ''),
    );
    this.#startHeartbeats();

    let timeoutTimer: NodeJS.Timeout | undefined;
    const timeoutS = spec.executionTimeoutSeconds;
    if (timeoutS > 0) {
      timeoutTimer = setTimeout(() => {
        if (this.#stop) return;
        this.#stop = { kind: 'timeout', seconds: timeoutS };
        this.#agentLine(`execution timeout after ${timeoutS}s; terminating the task process group`);
        void this.#killGroup();
      }, timeoutS * 1000);
    }

    const exit = await task.exited;
    const exitedAt = Date.now();
    clearTimeout(timeoutTimer);
    if (this.#killing) await this.#killing;
    else if (await task.reapGroup(this.#cfg.killGraceMs)) {
      this.#agentLine('terminated processes the task left running in its process group');
    }
    await this.#sweepAttemptUid(runAs);
    await task.outputDone(2_000);
    this.#agentLine(describeExit(exit));
    if (this.#masker && this.#masker.masked > 0) {
      // the log keeps the count (never what was masked)
      this.#agentLine(
        `masked ${this.#masker.masked} occurrence(s) of delivered secret values (or their encodings) in the task's output`,
      );
    }

    const stop = this.#stop;
    if (stop?.kind === 'terminate') {
      this.#stopHeartbeats();
      await shipper.drain(Date.now() + 10_000);
      this.#diag.log(
        'info',
        `exiting without a report: control plane asked to terminate (${stop.reason})`,
      );
      return EXIT.TERMINATED;
    }
    if (stop?.kind === 'signal') {
      const deadline = Math.max(Date.now() + 1_000, this.#cutoff);
      await shipper.drain(deadline);
      await this.#report(
        {
          state: ReportedState.FAILED,
          exitCode: exitCodeOf(exit),
          errorMessage: `agent received ${stop.signal}; task killed`,
          timedOut: false,
          occurredAtMs: exitedAt,
        },
        deadline,
      );
      this.#stopHeartbeats();
      return EXIT.SIGNALLED;
    }

    let outcome: Outcome;
    if (stop?.kind === 'timeout') {
      outcome = {
        state: ReportedState.FAILED,
        exitCode: exitCodeOf(exit),
        errorMessage: `execution timeout after ${stop.seconds}s`,
        timedOut: true,
        occurredAtMs: exitedAt,
      };
    } else if (exit.spawnError === undefined && exit.code === 0) {
      outcome = {
        state: ReportedState.SUCCESS,
        exitCode: 0,
        errorMessage: '',
        timedOut: false,
        occurredAtMs: exitedAt,
      };
    } else {
      outcome = {
        state: ReportedState.FAILED,
        exitCode: exitCodeOf(exit),
        errorMessage: describeExit(exit),
        timedOut: false,
        occurredAtMs: exitedAt,
      };
    }
    return this.#finish(outcome, spec);
  }

  /** Everything of the attempt's uid is killed, including what left the group (setsid, daemonize). */
  async #sweepAttemptUid(runAs: RunAs | undefined): Promise<void> {
    if (!this.#isolation) return;
    this.#isolation.taskEnded();
    const swept = await this.#isolation.killAll();
    if (swept.killed)
      this.#agentLine(`killed the processes the task left running as uid ${runAs?.uid ?? '?'}`);
    if (!swept.clean)
      this.#agentLine(
        `some processes of uid ${runAs?.uid ?? '?'} survived SIGKILL; the uid stays reserved`,
      );
  }

  /** XCom push (on success), log drain, then the state report with retries. */
  async #finish(outcome: Outcome, spec?: TaskSpec): Promise<number> {
    const shipper = this.#shipper;
    const deadline = Date.now() + this.#cfg.reportDeadlineMs;
    if (
      outcome.state === ReportedState.SUCCESS &&
      spec?.doXcomPush &&
      this.#lastStdout !== undefined
    ) {
      const failure = await this.#pushReturnValue(this.#lastStdout, deadline);
      if (failure !== undefined) {
        outcome = { ...outcome, state: ReportedState.FAILED, exitCode: 0, errorMessage: failure };
        this.#agentLine(failure);
      }
    }

    if (shipper) await shipper.drain(() => Math.min(deadline, this.#cutoff));
    const delivered = await this.#report(outcome, deadline);
    this.#stopHeartbeats();
    shipper?.stop();
    // Reported: nobody needs the reaper's record of the exit any more (issue 37 reads it after a
    // restart, when the report may not have gone out).
    if (delivered) this.#launcher?.discardStatus(this.#statusFile);
    if (delivered === 'terminated') return EXIT.TERMINATED;
    return delivered ? EXIT.OK : EXIT.REPORT_UNDELIVERED;
  }

  async #report(outcome: Outcome, deadline: number): Promise<boolean | 'terminated'> {
    const stateName = ReportedState[outcome.state] ?? String(outcome.state);
    const reads = readSecretReads(this.#secretReadsFile);
    try {
      const res = await retryUntil(
        () =>
          this.#client.reportState(
            {
              state: outcome.state,
              exitCode: outcome.exitCode,
              errorMessage: outcome.errorMessage,
              occurredAtMs: BigInt(outcome.occurredAtMs),
              timedOut: outcome.timedOut,
              ...reads,
            },
            this.#ownOpts(),
          ),
        {
          deadline,
          signal: this.#calls.signal,
          onRetry: (err, attempt, wait) => {
            if (this.#stop?.kind === 'terminate') return false;
            this.#diag.log(
              'warn',
              `ReportState ${stateName} failed (${codeName(err)}); retry ${attempt + 1} in ${wait} ms`,
            );
            return Date.now() + wait <= this.#cutoff;
          },
        },
      );
      this.#diag.log(
        'info',
        `reported ${stateName} (acknowledged=${res.acknowledged}${res.shouldTerminate ? ', should_terminate' : ''})`,
      );
      return true;
    } catch (err) {
      if (this.#stop?.kind === 'terminate') {
        this.#diag.log('warn', 'stopped reporting: control plane asked to terminate');
        return 'terminated';
      }
      this.#diag.log('error', `could not deliver ReportState ${stateName}: ${codeName(err)}`);
      return false;
    }
  }

  /** Returns a failure message, or undefined when the value was accepted. */
  async #pushReturnValue(line: string, deadline: number): Promise<string | undefined> {
    try {
      const res = await retryUntil(
        () =>
          this.#client.pushXCom(
            {
              key: 'return_value',
              value: new TextEncoder().encode(line),
              contentType: 'text/plain',
            },
            this.#ownOpts(),
          ),
        {
          deadline,
          signal: this.#calls.signal,
          onRetry: (_e, _a, wait) =>
            this.#stop?.kind !== 'terminate' && Date.now() + wait <= this.#cutoff,
        },
      );
      if (!res.accepted) return `xcom push rejected: ${res.rejectionReason || 'no reason given'}`;
      return undefined;
    } catch (err) {
      return `xcom push failed: ${codeName(err)}`;
    }
  }

  #agentLine(message: string): void {
    this.#shipper?.add('agent', message);
    this.#diag.log('info', message);
  }

  async #pushLogs(lines: BufferedLine[]): Promise<void> {
    await this.#client.pushLogs(
      {
        lines: lines.map((l) => ({
          lineNumber: BigInt(l.lineNumber),
          timeMs: BigInt(l.timeMs),
          stream: STREAMS[l.stream],
          message: l.message,
        })),
      },
      this.#ownOpts(),
    );
  }

  #callTimeout(deadline: number): number {
    return Math.max(1_000, Math.min(this.#cfg.rpcTimeoutMs, deadline - Date.now()));
  }

  #quickOpts(): { timeoutMs: number } {
    return { timeoutMs: this.#cfg.rpcTimeoutMs };
  }

  /** Per-call timeout plus the agent's own cancellation (see #calls). */
  #ownOpts(): { timeoutMs: number; signal: AbortSignal } {
    return { timeoutMs: this.#cfg.rpcTimeoutMs, signal: this.#calls.signal };
  }

  /**
   * Pre-task reads (secrets, upstream XComs): a transport failure — the control plane away or
   * restarting — is retried until the bootstrap deadline, as Register is; an answer with a
   * transient code gets a few quick retries within 5 s.
   */
  #preTaskRetry(name: string): RetryOptions {
    const quick = Date.now() + 5_000;
    return {
      deadline: Math.max(quick, this.#bootstrapDeadline),
      transientDeadline: quick,
      backoff: bootstrapBackoff,
      onRetry: (err, attempt) => {
        if (attempt === 0 || attempt % 10 === 0)
          this.#diag.log('warn', `${name} failed (${codeName(err)}); retrying`);
        return this.#stop === undefined;
      },
    };
  }

  /**
   * The attempt's uid is allocated while Register is on its way (the allocation scans /proc,
   * milliseconds of synchronous work per attempt that otherwise sat between GetTaskSpec and the
   * secret fetches): it waits one turn of the event loop first, so the Register request is on
   * the wire before the scan blocks the loop. Nothing runs as the uid before the bootstrap
   * succeeded.
   */
  async #acquireUidMeanwhile(): Promise<RunAs | undefined> {
    const isolation = this.#isolation;
    if (!isolation) return undefined;
    await new Promise<void>((resolve) => setImmediate(resolve));
    return isolation.acquire();
  }

  /** The agent's own Register (no hand-off registration came with the assignment). */
  #register(bootstrapDeadline: number): Promise<RegisterResponse> {
    return this.#bootstrapCall('Register', bootstrapDeadline, () =>
      this.#client.register(
        {
          agentVersion: AGENT_VERSION,
          protocolVersion: AGENT_PROTOCOL_VERSION,
          hostname: os.hostname(),
          pid: process.pid,
          sessionKey: this.#tokens.sessionKey,
          // this agent masks delivered values in its output (the server then need not)
          masksSecrets: true,
          // secrets, upstream XComs (and the spec, when it did not come on the pipe) in the
          // answer: one round trip between Register and the task's start instead of two
          prefetch: true,
          wantSpec: !this.#assignedSpec,
        },
        { timeoutMs: this.#callTimeout(bootstrapDeadline) },
      ),
    );
  }

  async #bootstrapCall<T>(name: string, deadline: number, fn: () => Promise<T>): Promise<T> {
    try {
      return await retryUntil(fn, {
        deadline,
        backoff: bootstrapBackoff,
        onRetry: (err, attempt) => {
          if (attempt === 0 || attempt % 10 === 0)
            this.#diag.log('warn', `${name} failed (${codeName(err)}); retrying`);
          return this.#stop === undefined;
        },
      });
    } catch (err) {
      // A precondition refusal (an incompatible agent protocol, say) or a refused credential (a
      // copied token registered first: LF_CREDENTIAL_COPIED) carries the server's explanation
      // and fix; the operator reads it in the agent's diagnostics.
      const why =
        err instanceof ConnectError &&
        (err.code === Code.FailedPrecondition ||
          err.code === Code.PermissionDenied ||
          err.code === Code.Unauthenticated)
          ? `: ${err.rawMessage}`
          : '';
      throw new Error(`${name} failed: ${codeName(err)}${why}`);
    }
  }

  /**
   * Best effort by contract: any refusal (PermissionDenied from the liveness gate,
   * Unimplemented on a server without secrets, …) means the task runs without them. A control
   * plane that is away (transport failure) is waited for until the bootstrap deadline, and a
   * transient answer gets a few quick retries, so neither a restart nor a blip silently strips a
   * task's secrets.
   */
  async #fetchSecrets(
    what: 'variables' | 'connections',
    prefetched: Record<string, string> | undefined,
    refusedAtRegister: { message: string; code: string } | undefined,
    fn: () => Promise<Record<string, string>>,
  ): Promise<Record<string, string> | undefined> {
    if (prefetched) return prefetched;
    if (refusedAtRegister?.message) {
      // the refusal its own call would have answered (PermissionDenied), given once at Register
      if (refusedAtRegister.code === SECRET_NOT_GRANTED)
        throw new SecretNotGrantedError(refusedAtRegister.message);
      this.#refusedSecretFetch(what, 'PermissionDenied');
      return undefined;
    }
    try {
      return await retryUntil(
        fn,
        this.#preTaskRetry(what === 'variables' ? 'GetVariables' : 'GetConnections'),
      );
    } catch (err) {
      // A declared secret the grants no longer give this DAG: the task would run without what it
      // declared, so the attempt fails with the server's sentence (issue 34). Decided by the
      // code in the metadata, never by the message.
      if (
        err instanceof ConnectError &&
        err.metadata.get(ERROR_CODE_METADATA) === SECRET_NOT_GRANTED
      )
        throw new SecretNotGrantedError(err.rawMessage);
      this.#refusedSecretFetch(what, codeName(err));
      return undefined;
    }
  }

  #refusedSecretFetch(what: 'variables' | 'connections', code: string): void {
    const line = `secret fetch refused: ${code} (${what})`;
    this.#shipper?.add('agent', line);
    this.#diag.log('warn', line);
  }

  async #fetchUpstreamXComs(
    spec: TaskSpec,
    xcomDir: string,
    chownTo: RunAs | undefined,
  ): Promise<EnvMap> {
    mkdirSync(xcomDir, { recursive: true, mode: 0o700 });
    if (chownTo) chownSync(xcomDir, chownTo.uid, chownTo.gid);
    const env: EnvMap = {};
    // Fetched together; written and exported in depends_on order (the later one wins a name).
    const prefetched = new Map(
      (this.#prefetch?.xcoms?.upstreams ?? []).map((u) => [u.upstreamTaskId, u.xcom]),
    );
    const fetched = await Promise.all(
      spec.dependsOn.map(async (upstream): Promise<Uint8Array | undefined> => {
        const answered = prefetched.get(upstream);
        if (answered) return answered.found ? answered.value : undefined;
        try {
          const res = await retryUntil(
            () =>
              this.#client.fetchXCom(
                { upstreamTaskId: upstream, key: 'return_value' },
                this.#quickOpts(),
              ),
            this.#preTaskRetry(`FetchXCom(${upstream})`),
          );
          return res.found ? res.value : undefined;
        } catch (err) {
          if (errorCode(err) !== Code.NotFound)
            this.#agentLine(`xcom fetch from ${upstream} failed: ${codeName(err)}`);
          return undefined;
        }
      }),
    );
    for (const [i, upstream] of spec.dependsOn.entries()) {
      const value = fetched[i];
      if (value === undefined) continue;
      // Task ids become file names: refuse anything that could escape the xcom directory.
      if (upstream === '' || upstream === '.' || upstream === '..' || /[/\\\0]/.test(upstream)) {
        this.#agentLine(
          `xcom from ${JSON.stringify(upstream)} not written: unusable as a file name`,
        );
      } else {
        writeTaskFile(path.join(xcomDir, upstream), value, chownTo);
      }
      const name = xcomEnvName(upstream);
      if (name === 'LEOFLOW_XCOM_DIR') {
        this.#agentLine(
          `xcom from ${upstream} not exported as env: its name collides with LEOFLOW_XCOM_DIR`,
        );
        continue;
      }
      if (value.length > XCOM_ENV_MAX_BYTES) continue;
      let text: string;
      try {
        text = fatalUtf8.decode(value);
      } catch {
        continue;
      }
      if (text.includes('\0')) continue;
      env[name] = text;
    }
    return env;
  }

  #startHeartbeats(): void {
    this.#heartbeats = new HeartbeatLoop({
      intervalMs: this.#heartbeatIntervalMs,
      timers: this.#timers,
      tokens: this.#tokens,
      send: (sentAtMs) =>
        this.#client.heartbeat(
          { sentAtMs: BigInt(sentAtMs) },
          {
            timeoutMs: Math.max(1_000, Math.min(this.#cfg.rpcTimeoutMs, this.#heartbeatIntervalMs)),
          },
        ),
      onTerminate: (reason) => this.#onTerminate(reason),
      log: (level, message) => this.#diag.log(level, message),
    });
    this.#heartbeats.start();
  }

  #stopHeartbeats(): void {
    clearTimeout(this.#cutoffTimer);
    this.#heartbeats?.stop();
  }

  #onTerminate(reason: string): void {
    if (this.#stop?.kind === 'terminate') return;
    // A terminate outranks a timeout or signal already in progress: nothing should be reported.
    this.#stop = { kind: 'terminate', reason };
    this.#agentLine(
      `control plane asked to terminate (${reason}); terminating the task process group`,
    );
    void this.#killGroup();
  }

  #killGroup(): Promise<void> {
    if (!this.#task) return Promise.resolve();
    this.#killing ??= this.#task.terminateGroup(this.#cfg.killGraceMs);
    return this.#killing;
  }
}

export function describeExit(exit: TaskExit): string {
  if (exit.spawnError !== undefined) return `task could not be started: ${exit.spawnError}`;
  if (exit.code !== null) return `task exited with code ${exit.code}`;
  if (exit.signal) return `killed by signal ${exit.signal}`;
  return 'task exited';
}
