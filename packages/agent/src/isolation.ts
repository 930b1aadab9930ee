import { accessSync, constants as fsc } from 'node:fs';
import path from 'node:path';
import type { UidRange } from '@leoflow/core';
import {
  killUidNow,
  procfs,
  removeLeftovers,
  sweepUid,
  UidAllocator,
  type ProcessTable,
  type UidLease,
} from './attempt-uid.js';
import type { LaunchPlan, RunAs } from './task-process.js';
import type { TaskLauncher } from './sandbox/launcher.js';

export interface IsolationSettings {
  range: UidRange;
  /** RLIMIT_NPROC for the attempt's uid; 0 = not applied */
  nproc: number;
  lockDir?: string | undefined;
  /** PATH to look for prlimit on */
  pathVar?: string | undefined;
  /** this installation's name for its allocation hint (see UidAllocator) */
  instance?: string | undefined;
}

/**
 * One attempt's own uid: allocated before the task starts, every process of it killed when the
 * task ends (a `setsid` child included), released only once none is left.
 */
export class AttemptIsolation {
  readonly #settings: IsolationSettings;
  #taskEnded = false;
  #emptySinceTaskEnd = false;
  readonly #procs: ProcessTable;
  #lease: UidLease | undefined;
  readonly prlimit: string | undefined;

  readonly #launcher: TaskLauncher | undefined;

  constructor(settings: IsolationSettings, procs: ProcessTable = procfs, launcher?: TaskLauncher) {
    this.#settings = settings;
    this.#procs = procs;
    this.#launcher = launcher;
    // The sandbox helper sets RLIMIT_NPROC itself; prlimit only without it.
    this.prlimit =
      settings.nproc > 0 && !launcher?.helper ? findPrlimit(settings.pathVar) : undefined;
  }

  get nproc(): number {
    return this.#settings.nproc;
  }

  get uid(): number | undefined {
    return this.#lease?.uid;
  }

  /** Allocates the attempt's uid (gid = uid, no supplementary groups). */
  async acquire(): Promise<RunAs> {
    if (this.#lease) return { uid: this.#lease.uid, gid: this.#lease.gid };
    const allocator = new UidAllocator({
      range: this.#settings.range,
      ...(this.#settings.lockDir ? { lockDir: this.#settings.lockDir } : {}),
      ...(this.#settings.instance ? { instance: this.#settings.instance } : {}),
      procs: this.#procs,
      cleanup: (uid) => this.#scrub(uid),
    });
    this.#lease = await allocator.allocate();
    return { uid: this.#lease.uid, gid: this.#lease.gid };
  }

  /** Why RLIMIT_NPROC is not applied, or undefined when it is. */
  nprocProblem(): string | undefined {
    if (this.#settings.nproc <= 0)
      return 'RLIMIT_NPROC not applied (execution.attempt_nproc_limit is 0)';
    if (this.#launcher?.helper) return undefined;
    if (!this.prlimit) return 'RLIMIT_NPROC not applied: prlimit (util-linux) is not on PATH';
    return undefined;
  }

  /**
   * Runs the task under `prlimit --nproc`: prlimit starts as the attempt's uid, lowers its own
   * limit (allowed unprivileged) and execs the task, so the pid and process group stay the
   * task's. The limit counts every process and thread of the uid, i.e. of this attempt only.
   */
  wrap(plan: LaunchPlan): LaunchPlan {
    if (!this.prlimit || this.#settings.nproc <= 0) return plan;
    const n = this.#settings.nproc;
    return { file: this.prlimit, args: [`--nproc=${n}:${n}`, '--', plan.file, ...plan.args] };
  }

  /** Kills every process of the attempt's uid; true when any was found. */
  async killAll(): Promise<{ killed: boolean; clean: boolean }> {
    const uid = this.#lease?.uid;
    if (uid === undefined) return { killed: false, clean: true };
    // Only root creates processes of a uid, so an empty scan stays empty: no helper needed.
    if (this.#procs.processesOf(uid).length === 0) {
      this.#emptySinceTaskEnd = this.#taskEnded;
      return { killed: false, clean: true };
    }
    const clean = await sweepUid(uid, { procs: this.#procs });
    this.#emptySinceTaskEnd = clean && this.#taskEnded;
    return { killed: true, clean };
  }

  /**
   * The task has exited and the agent will start nothing more as this uid: from here on, once a
   * sweep finds the uid empty it stays empty (only root creates processes of a uid), so the
   * final sweep in end() need not scan /proc again.
   */
  taskEnded(): void {
    this.#taskEnded = true;
  }

  /** Final sweep, then the uid goes back to the range; kept held when something survived. */
  async end(): Promise<boolean> {
    if (!this.#lease) return true;
    const { clean } = this.#emptySinceTaskEnd ? { clean: true } : await this.killAll();
    if (!clean) return false;
    this.#scrub(this.#lease.uid);
    this.#lease.release();
    this.#lease = undefined;
    return true;
  }

  /**
   * Nothing of the uid may reach the next attempt given it: with a launcher, its keyrings are
   * cleared and (fallback) its world-writable leftovers swept, as the uid; without one, the
   * leftovers at the top of the shared temp dirs go (removeLeftovers, which never follows a
   * link either).
   */
  #scrub(uid: number): void {
    if (this.#launcher) this.#launcher.scrubUid(uid);
    else removeLeftovers(uid);
  }

  /** Crash path: synchronous SIGKILL of every process of the uid (the entry stays for reclaim). */
  killNow(): void {
    if (this.#lease) killUidNow(this.#lease.uid, this.#procs);
  }
}

function findPrlimit(pathVar: string | undefined): string | undefined {
  const dirs = [...(pathVar ?? '').split(path.delimiter), '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const p = path.join(dir, 'prlimit');
    try {
      accessSync(p, fsc.X_OK);
      return p;
    } catch {
      // keep looking
    }
  }
  return undefined;
}
