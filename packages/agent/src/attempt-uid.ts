import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';
import { formatUidRange, type UidRange, ConfigError } from '@leoflow/core';
import { findHelper, removeTree } from './sandbox/helper.js';

/**
 * Per-attempt uids, on the agent's side of the trust boundary (a runner daemon reuses this on
 * its own machine). Every agent allocates for itself; agents are separate processes, so the
 * allocation is coordinated through the filesystem:
 *
 *   <lockDir>/<uid>          created O_EXCL by the agent that holds <uid>; holds "<pid> <start>"
 *   <lockDir>/<uid>.reclaim  created O_EXCL while one agent reclaims a stale <uid> entry
 *
 * lockDir is root-owned and 0700, so tasks can neither read nor forge entries. An entry is stale
 * only when its owner is dead (pid gone, or reused: its start time differs) AND no process of
 * that uid is left; leftovers of a dead owner are killed first. Only the holder of
 * <uid>.reclaim removes a stale <uid> entry, and a live owner's entry is never removed by anyone
 * else, so two agents never hold one uid. A reclaim lock whose holder died mid-reclaim (a window
 * of a few syscalls) is left in place: that one uid stays unused until the entry is removed by
 * hand or the lock directory (on /run, a tmpfs) is cleared at reboot. Safety over recovery.
 */
export const DEFAULT_UID_LOCK_DIR = '/run/leoflow/attempt-uids';

/** What the allocator asks of the machine; the real one reads /proc (tests inject others). */
export interface ProcessTable {
  /** the process's start time (clock ticks since boot), or undefined when it does not exist */
  startTime(pid: number): string | undefined;
  /** pids (not zombies) whose real, effective, saved or filesystem uid is `uid` */
  processesOf(uid: number): number[];
}

export const procfs: ProcessTable = {
  startTime(pid) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (rest[0] === 'Z' || rest[0] === 'X') return undefined;
      return rest[19];
    } catch {
      return undefined;
    }
  },
  processesOf(uid) {
    const out: number[] = [];
    let entries: string[];
    try {
      entries = readdirSync('/proc');
    } catch {
      return out;
    }
    const want = String(uid);
    for (const e of entries) {
      if (!isPid(e)) continue;
      const status = readStatusHead(e);
      if (status === undefined) continue;
      const ids = uidsOf(status);
      // A zombie or dead task can no longer act (only its parent reaps it); all else counts.
      if (ids === undefined || !ids.includes(want)) continue;
      const state = /^State:\s+(\S)/m.exec(status)?.[1];
      if (state === 'Z' || state === 'X') continue;
      out.push(Number(e));
    }
    return out;
  },
};

/**
 * The scan reads one /proc/<pid>/status per process on the machine, twice per attempt, so it is
 * the agent's hottest path under load: one open/read/close into a shared buffer (readFileSync
 * adds an fstat, a second read to find EOF and a concatenation) and a parse of the first lines
 * only. State and Uid are lines 3 and 9, within a few hundred bytes even with the longest
 * escaped Name; a status whose head holds no Uid line is read whole instead.
 */
const STATUS_HEAD = Buffer.allocUnsafe(1024);

function readStatusHead(pid: string): string | undefined {
  const file = `/proc/${pid}/status`;
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return undefined;
  }
  let n: number;
  try {
    n = readSync(fd, STATUS_HEAD, 0, STATUS_HEAD.length, 0);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
  const head = STATUS_HEAD.toString('latin1', 0, n);
  if (n < STATUS_HEAD.length || head.includes('\nUid:')) return head;
  try {
    return readFileSync(file, 'latin1');
  } catch {
    return undefined;
  }
}

/** real, effective, saved and filesystem uid, as the status file spells them */
function uidsOf(status: string): string[] | undefined {
  const at = status.indexOf('\nUid:');
  if (at < 0) return undefined;
  const end = status.indexOf('\n', at + 5);
  return status
    .slice(at + 5, end < 0 ? undefined : end)
    .trim()
    .split(/\s+/);
}

function isPid(name: string): boolean {
  if (name.length === 0) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

export interface UidLease {
  uid: number;
  gid: number;
  /** removes the entry; call only once every process of the uid is gone (see endAttemptUid) */
  release(): void;
}

export interface UidAllocatorOptions {
  range: UidRange;
  lockDir?: string;
  procs?: ProcessTable;
  /** the owner recorded in the entry (default: this process) */
  ownerPid?: number;
  /** kills every process of a uid whose owner died (default: sweepUid) */
  sweep?: (uid: number) => Promise<boolean>;
  /** test hook: ownership of the lock directory is checked against this uid (default: ours) */
  expectedOwner?: number;
  /** removes what a dead owner's attempt left in shared temp dirs (default: removeLeftovers) */
  cleanup?: (uid: number) => void;
  /**
   * This installation's name (Lite: its install id; a runner: its work dir's): it keeps its own
   * allocation hint, `next.<instance>`, so another installation's allocations never send this one
   * back to the start of its range (issue 33, finding 3: one shared hint forced quick reuse).
   * Claims stay shared: two installations whose ranges overlap never hold one uid at once.
   */
  instance?: string;
}

/** The file naming one installation's range in the lock dir (doctor warns about overlaps). */
export const RANGES_DIR = 'ranges';

/** The lock directory must be ours, 0700 and not a link: anyone else could forge entries. */
export function ensureLockDir(dir: string, owner: number | undefined = process.getuid?.()): void {
  mkdirSync(path.dirname(dir), { recursive: true, mode: 0o755 });
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const st = lstatSync(dir);
  if (!st.isDirectory() || (owner !== undefined && st.uid !== owner) || (st.mode & 0o077) !== 0) {
    throw new ConfigError(
      'LF_ATTEMPT_UID_LOCK_DIR',
      `${dir} must be a directory owned by uid ${owner ?? '?'} with mode 0700 (it is ${st.isSymbolicLink() ? 'a symlink' : `mode ${(st.mode & 0o7777).toString(8)}, owner ${st.uid}`}); another user could forge attempt uid entries there — remove it and let the agent recreate it`,
    );
  }
}

export class UidAllocator {
  readonly #range: UidRange;
  readonly #dir: string;
  readonly #procs: ProcessTable;
  readonly #record: string;
  readonly #sweep: (uid: number) => Promise<boolean>;
  readonly #cleanup: (uid: number) => void;
  readonly #hintFile: string;

  constructor(opts: UidAllocatorOptions) {
    this.#range = opts.range;
    this.#dir = opts.lockDir ?? DEFAULT_UID_LOCK_DIR;
    this.#procs = opts.procs ?? procfs;
    const pid = opts.ownerPid ?? process.pid;
    this.#record = `${pid} ${this.#procs.startTime(pid) ?? '?'}\n`;
    this.#sweep = opts.sweep ?? ((uid) => sweepUid(uid, { procs: this.#procs }));
    this.#cleanup = opts.cleanup ?? ((uid) => void removeLeftovers(uid));
    ensureLockDir(this.#dir, opts.expectedOwner ?? process.getuid?.());
    const instance = (opts.instance ?? 'default').replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
    this.#hintFile = path.join(this.#dir, `next.${instance}`);
    recordRange(this.#dir, instance, this.#range);
  }

  get range(): UidRange {
    return this.#range;
  }

  /**
   * The next free uid, going round the range from where the last allocation stopped (so a
   * released uid comes back as late as possible); LF_ATTEMPT_UIDS_EXHAUSTED when all are held.
   */
  async allocate(): Promise<UidLease> {
    const { first, last } = this.#range;
    const size = last - first + 1;
    const start = this.#hint();
    for (let i = 0; i < size; i++) {
      const uid = first + ((start - first + i) % size);
      if (await this.#tryClaim(uid)) {
        this.#setHint(uid === last ? first : uid + 1);
        return this.#lease(uid);
      }
    }
    throw new ConfigError(
      'LF_ATTEMPT_UIDS_EXHAUSTED',
      `every uid of execution.attempt_uid_range (${formatUidRange(this.#range)}, ${last - first + 1} uids) is held by a running attempt or by processes a dead attempt left behind; widen the range (--attempt-uid-range) or run fewer attempts at once (held entries: ${this.#dir})`,
    );
  }

  /**
   * Every uid of the range whose entry names a dead owner is reclaimed now (its processes killed,
   * its leftovers removed) and given back. Lite's host agent calls it at start: after a crash of
   * its predecessor, the tasks that predecessor ran must be gone before the control plane ends
   * and retries their attempts, so two attempts of one task never overlap. Returns the uids.
   */
  async reclaimStale(): Promise<number[]> {
    const out: number[] = [];
    let names: string[];
    try {
      names = readdirSync(this.#dir);
    } catch {
      return out;
    }
    for (const name of names) {
      if (!/^\d+$/.test(name)) continue;
      const uid = Number(name);
      if (uid < this.#range.first || uid > this.#range.last) continue;
      const file = path.join(this.#dir, name);
      const seen = readOrNull(file);
      if (seen === null || this.#ownerAlive(seen)) continue;
      if (await this.#tryReclaim(uid, file)) {
        this.#lease(uid).release();
        out.push(uid);
      }
    }
    return out;
  }

  /** Where to start looking: only a hint (a lost race on it costs a few extra EEXISTs). */
  #hint(): number {
    const n = Number(readOrNull(this.#hintFile)?.trim());
    return Number.isInteger(n) && n >= this.#range.first && n <= this.#range.last
      ? n
      : this.#range.first;
  }

  #setHint(uid: number): void {
    try {
      writeFileSync(this.#hintFile, `${uid}\n`, { mode: 0o600 });
    } catch {
      // a hint only
    }
  }

  #lease(uid: number): UidLease {
    const file = path.join(this.#dir, String(uid));
    const record = this.#record;
    let released = false;
    return {
      uid,
      gid: uid,
      release: () => {
        if (released) return;
        released = true;
        // Only our own entry: never one a reclaimer put there after deciding we were dead.
        if (readOrNull(file) === record) unlinkSync(file);
      },
    };
  }

  async #tryClaim(uid: number): Promise<boolean> {
    const file = path.join(this.#dir, String(uid));
    if (createExclusive(file, this.#record)) {
      // A uid that already has processes is used by something outside this lock directory
      // (an account added to NSS after boot, another installation): never share it.
      if (this.#procs.processesOf(uid).length === 0) return true;
      unlinkSync(file);
      return false;
    }
    return this.#tryReclaim(uid, file);
  }

  async #tryReclaim(uid: number, file: string): Promise<boolean> {
    const seen = readOrNull(file);
    if (seen === null) return createExclusive(file, this.#record); // released meanwhile
    if (this.#ownerAlive(seen)) return false;
    const lock = `${file}.reclaim`;
    if (!createExclusive(lock, this.#record)) return false; // someone else is reclaiming it
    try {
      // Under the reclaim lock nobody but a live owner changes the entry, and it is dead.
      if (readOrNull(file) !== seen) return false;
      if (this.#procs.processesOf(uid).length > 0 && !(await this.#sweep(uid))) return false;
      this.#cleanup(uid);
      unlinkSync(file);
      return createExclusive(file, this.#record);
    } finally {
      unlinkSync(lock);
    }
  }

  #ownerAlive(record: string): boolean {
    const [pid, start] = record.trim().split(' ');
    const n = Number(pid);
    if (!Number.isInteger(n) || n <= 0) return false;
    const now = this.#procs.startTime(n);
    return now !== undefined && (start === '?' || now === start);
  }
}

/** Notes which range an installation allocates from (read by doctor: overlapping installations). */
function recordRange(dir: string, instance: string, range: UidRange): void {
  const ranges = path.join(dir, RANGES_DIR);
  const text = `${formatUidRange(range)}\n`;
  try {
    if (readOrNull(path.join(ranges, instance)) === text) return;
    mkdirSync(ranges, { recursive: true, mode: 0o700 });
    writeFileSync(path.join(ranges, instance), text, { mode: 0o600 });
  } catch {
    // a note for doctor only
  }
}

/** Every installation's range noted in `dir`, by instance name. */
export function recordedRanges(dir: string = DEFAULT_UID_LOCK_DIR): Record<string, string> {
  const out: Record<string, string> = {};
  try {
    for (const name of readdirSync(path.join(dir, RANGES_DIR)))
      out[name] = readOrNull(path.join(dir, RANGES_DIR, name))?.trim() ?? '';
  } catch {
    // none noted
  }
  return out;
}

/**
 * Creates `file` holding `content`, or returns false when it exists. The record is written to a
 * private temporary file first and hard-linked into place (link fails with EEXIST atomically),
 * so nobody ever reads a half-written entry and takes its emptiness for a dead owner.
 */
function createExclusive(file: string, content: string): boolean {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, content);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    unlinkSync(tmp);
  }
}

function readOrNull(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

export interface SweepOptions {
  procs?: ProcessTable;
  /** how long to keep killing and looking before giving up */
  timeoutMs?: number;
}

/**
 * Kills every process of `uid`: a helper running as that uid calls kill(-1, SIGKILL), which
 * reaches everything the uid owns (a `setsid` child included) and nothing else; then /proc is
 * checked, and any straggler (forked during the kill) is killed by pid. Resolves true once no
 * process of the uid is left, false if some remain after the timeout (the uid is then not
 * released). Needs root.
 */
export async function sweepUid(uid: number, opts: SweepOptions = {}): Promise<boolean> {
  const procs = opts.procs ?? procfs;
  const deadline = Date.now() + (opts.timeoutMs ?? 5_000);
  // Only root creates processes of a uid: when none is left, none can appear (the common case,
  // which then costs one /proc scan and no helper).
  if (procs.processesOf(uid).length === 0) return true;
  await killAsUid(uid);
  for (;;) {
    const left = procs.processesOf(uid);
    if (left.length === 0) return true;
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** kill(-1, SIGKILL) as `uid`: the kernel signals every process that uid may signal. */
function killAsUid(uid: number): Promise<void> {
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', ['-c', 'kill -9 -1'], {
      uid,
      gid: uid,
      env: {},
      stdio: 'ignore',
    });
    child.once('error', () => resolve());
    child.once('exit', () => resolve());
  });
}

/** World-writable places where an attempt can leave files outside its work dir. */
export const SHARED_TMP_DIRS = ['/tmp', '/var/tmp', '/dev/shm', '/run/lock'];

/**
 * Removes what the uid left at the top of the shared temporary directories, so the next attempt
 * given this uid does not inherit it. Call only once no process of the uid is left. A directory
 * is removed by the sandbox helper, which opens every level O_NOFOLLOW|O_DIRECTORY relative to
 * its parent and unlinks relative to it, as the directory's owner: another attempt that swaps a
 * subdirectory for a link meanwhile makes it delete nothing outside the tree (issue 33, finding
 * 1: a recursive delete by path as root followed such a link). The agent's launcher sweeps every
 * world-writable dir at any depth instead (TaskLauncher.scrubUid); this is the launcher-less path.
 * Returns how many entries were removed.
 */
export function removeLeftovers(uid: number, dirs: readonly string[] = SHARED_TMP_DIRS): number {
  let removed = 0;
  const helper = findHelper();
  for (const dir of dirs) {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of entries) {
      const p = path.join(dir, name);
      try {
        const st = lstatSync(p);
        if (st.uid !== uid) continue;
        // unlink never follows the last component; a directory goes through removeTree
        if (!st.isDirectory()) unlinkSync(p);
        else if (!removeTree(p, helper)) continue;
        removed++;
      } catch {
        // gone meanwhile, or not removable: leave it
      }
    }
  }
  return removed;
}

/** Synchronous last resort (agent crash handler): SIGKILL every process of the uid by pid. */
export function killUidNow(uid: number, procs: ProcessTable = procfs): void {
  for (let round = 0; round < 5; round++) {
    const left = procs.processesOf(uid);
    if (left.length === 0) return;
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
}
