import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@connectrpc/connect';
import type { AckAssignmentResponse, AgentService, Assignment } from '@leoflow/protocol';
import { Agent } from '../agent.js';
import type { AgentConfig } from '../config.js';
import type { Diagnostics } from '../diag.js';
import { AttemptIsolation, type IsolationSettings } from '../isolation.js';
import { TokenHolder } from '../token.js';
import { procfs } from '../attempt-uid.js';
import { findHelper, removeTree } from '../sandbox/helper.js';
import type { TaskLauncher } from '../sandbox/launcher.js';

/** What every attempt of one daemon shares. */
export interface AttemptHost {
  /** a client for one attempt: every call carries that attempt's token (and session key) */
  clientFor(tokens: TokenHolder): Client<typeof AgentService>;
  /** where attempt work dirs are made (0711, so an attempt uid reaches only its own 0700 dir) */
  workRoot: string;
  /** the daemon's minimal env (PATH, LANG, …): the task env is built from it, LEOFLOW_* stripped */
  agentEnv: Record<string, string>;
  /** node_modules node tasks resolve packages from (Lite's SDK copy); undefined: none */
  nodeModules?: string | undefined;
  /** the Python SDK's read-only copy python tasks import (Lite's); undefined: none */
  pythonSdk?: string | undefined;
  /** per-attempt uids (root only); undefined runs the task as the daemon's user */
  attemptUids: AgentConfig['attemptUids'];
  diag: Diagnostics;
  /**
   * The host's sandbox, one for every attempt this process runs (docs/security.md, "The
   * sandbox"); undefined runs tasks without it (tests of the daemon's protocol only).
   */
  launcher?: TaskLauncher | undefined;
  /** this installation's name for its uid allocation hint */
  instance?: string | undefined;
  /** builds an attempt's isolation (tests inject one that reports survivors) */
  isolationFor?: (settings: IsolationSettings) => AttemptIsolation;
  /** the agent's timings (tests shorten them) */
  timings?: Partial<
    Pick<AgentConfig, 'reportDeadlineMs' | 'bootstrapDeadlineMs' | 'killGraceMs' | 'rpcTimeoutMs'>
  >;
}

/**
 * One assignment, run with the same agent code as a subprocess attempt: its own token holder
 * (renewals replace it), its own work dir (removed after), its own uid when the daemon is root.
 */
export class RunnerAttempt {
  readonly assignmentId: string;
  readonly taskInstanceId: string;
  readonly #agent: Agent;
  readonly #isolation: AttemptIsolation | undefined;
  readonly #workdir: string;
  readonly #diag: Diagnostics;
  readonly #client: Client<typeof AgentService>;
  readonly #launcher: TaskLauncher | undefined;
  #leftovers: string[] = [];

  constructor(a: Assignment, host: AttemptHost) {
    this.assignmentId = a.assignmentId;
    this.taskInstanceId = a.spec?.taskInstanceId ?? '';
    const tokens = new TokenHolder(a.attemptToken);
    mkdirSync(host.workRoot, { recursive: true, mode: 0o711 });
    this.#workdir = mkdtempSync(join(host.workRoot, 'attempt-'));
    this.#diag = host.diag;
    const config: AgentConfig = {
      agentUrl: 'http://runner-session',
      standby: false,
      taskInstanceId: this.taskInstanceId,
      workdir: this.#workdir,
      heartbeatIntervalMs: Math.max(1, a.heartbeatIntervalSeconds) * 1000,
      heartbeatIntervalFromEnv: false,
      runAs: undefined,
      attemptUids: host.attemptUids,
      python: host.agentEnv['LEOFLOW_PYTHON'] || 'python3',
      node: process.execPath,
      nodeModules: host.nodeModules,
      pythonSdk: host.pythonSdk,
      reportDeadlineMs: host.timings?.reportDeadlineMs ?? 15 * 60_000,
      bootstrapDeadlineMs: host.timings?.bootstrapDeadlineMs ?? 60_000,
      killGraceMs: host.timings?.killGraceMs ?? 5_000,
      rpcTimeoutMs: host.timings?.rpcTimeoutMs ?? 10_000,
    };
    this.#client = host.clientFor(tokens);
    this.#launcher = host.launcher;
    const isolationFor =
      host.isolationFor ?? ((s) => new AttemptIsolation(s, procfs, host.launcher));
    this.#isolation =
      host.attemptUids && process.getuid?.() === 0
        ? isolationFor({
            ...host.attemptUids,
            pathVar: host.agentEnv['PATH'],
            instance: host.instance,
          })
        : undefined;
    this.#agent = new Agent({
      config,
      isolation: this.#isolation,
      launcher: host.launcher,
      client: this.#client,
      tokens,
      diag: host.diag,
      agentEnv: host.agentEnv,
      startedAt: Date.now(),
    });
  }

  /** the attempt's work dir (0700, removed when the attempt ends) */
  get workdir(): string {
    return this.#workdir;
  }

  /** the attempt's own uid while it holds one (root with attempt uids) */
  get uid(): number | undefined {
    return this.#isolation?.uid;
  }

  /** True when the attempt runs under a uid of its own (root with attempt uids). */
  get isolated(): boolean {
    return this.#isolation !== undefined;
  }

  /**
   * What of the attempt survived its end, once run() has returned: processes of its uid that
   * outlived SIGKILL, a work dir that could not be removed. Empty when nothing is left.
   */
  get leftovers(): readonly string[] {
    return this.#leftovers;
  }

  /** Takes the assignment, with the attempt's own token (never the runner's session). */
  ack(): Promise<AckAssignmentResponse> {
    return this.#client.ackAssignment({ assignmentId: this.assignmentId }, { timeoutMs: 10_000 });
  }

  /** Not taken after all: nothing ran; its work dir goes. */
  discard(): void {
    this.#removeWorkdir();
  }

  /** Never a recursive delete by path as root: the task may have written the tree (removeTree). */
  #removeWorkdir(): void {
    if (this.#launcher) this.#launcher.removeWorkdir(this.#workdir);
    else removeTree(this.#workdir, findHelper());
  }

  /** Runs the attempt to its end; the agent's exit code. Never throws. */
  async run(): Promise<number> {
    try {
      return await this.#agent.run();
    } catch (err) {
      this.#diag.log(
        'error',
        `attempt failed: ${err instanceof Error ? err.message : String(err)}`,
      );
      this.#agent.killTaskGroupNow();
      return 1;
    } finally {
      this.#leftovers = await this.#cleanUp();
    }
  }

  async #cleanUp(): Promise<string[]> {
    const leftovers: string[] = [];
    if (this.#isolation) {
      const uid = this.#isolation.uid;
      if (!(await this.#isolation.end())) {
        this.#diag.log(
          'error',
          `processes of uid ${uid ?? '?'} survived SIGKILL; the uid stays held`,
        );
        leftovers.push(`processes of uid ${uid ?? '?'} survived SIGKILL`);
      }
    }
    try {
      this.#removeWorkdir();
    } catch (err) {
      this.#diag.log('error', `work dir ${this.#workdir} not removed: ${String(err)}`);
    }
    if (existsSync(this.#workdir)) leftovers.push(`work dir ${this.#workdir} still exists`);
    return leftovers;
  }

  /** The control plane cancelled it (terminate, revoke): stop the task now. */
  cancel(): void {
    this.#agent.onSignal('SIGTERM');
  }

  /** The daemon is going away: the task group must not outlive it. */
  killNow(): void {
    this.#agent.killTaskGroupNow();
  }
}
