import { ConfigError } from '@leoflow/core';
import type { Logger } from 'pino';
import { SCHEDULER_LEASE, type LeaderFence } from '../../store/ports/leader-fence.js';
import type { Leadership } from './leadership.js';
import type { LeaseStore } from './lease-store.js';

/** The timers the elector schedules with; tests pass manual ones. */
export interface ElectorTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface LeaseElectorOptions {
  /** the elector only contends; reading the holder (current) is the probes' */
  leases: Omit<LeaseStore, 'current'>;
  /** unique per process start: a restarted replica must not renew its predecessor's lease */
  holder: string;
  /** the lease row; the scheduler's unless a test says otherwise */
  name?: string;
  /** how long a grant lasts in the database */
  ttlMs: number;
  /** how often the leader renews, and how often a follower tries to acquire */
  renewIntervalMs: number;
  /**
   * How much sooner than the grant this process stops acting on it: covers the drift of its
   * clock against the database's over one ttl and a write in flight at the deadline.
   */
  safetyMarginMs: number;
  logger: Logger;
  /** a monotonic clock in ms (performance.now); never the wall clock, which may jump */
  monotonicNow?: () => number;
  timers?: ElectorTimers;
}

interface Term {
  epoch: number;
  /** on this process's monotonic clock: the last moment it may act as the leader */
  deadline: number;
}

const REAL_TIMERS: ElectorTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * Scheduler leadership through a lease row (docs/pro.md, "Scheduler leadership").
 *
 * The leader's own deadline is the send time of its last successful renewal + ttl − safety
 * margin, on its monotonic clock. The database computed that grant's expiry from its clock when
 * it ran the statement, which was after the send, so the deadline falls before the expiry as the
 * database sees it: a leader cut off from the database stops before anyone else can start.
 * Timing is only the first line; the epoch in every fenced write is what makes a late write of
 * a deposed leader change nothing.
 */
export class LeaseElector implements Leadership {
  private readonly name: string;
  private readonly now: () => number;
  private readonly timers: ElectorTimers;
  private readonly listeners: ((leading: boolean) => void)[] = [];
  private term: Term | null = null;
  /** whether listeners were last told this process leads */
  private announced = false;
  private attemptTimer: unknown = null;
  private deadlineTimer: unknown = null;
  private stopped = true;
  /** consecutive failed attempts, so a long outage logs once, not every interval */
  private failures = 0;

  constructor(private readonly opts: LeaseElectorOptions) {
    const { ttlMs, renewIntervalMs, safetyMarginMs } = opts;
    if (!(ttlMs > 0 && renewIntervalMs > 0 && safetyMarginMs > 0)) {
      throw new ConfigError(
        'LF_CONFIG_INVALID',
        'scheduler lease: ttl, renew interval and safety margin must all be positive',
      );
    }
    if (renewIntervalMs + safetyMarginMs >= ttlMs) {
      throw new ConfigError(
        'LF_CONFIG_INVALID',
        `scheduler lease: renew interval (${renewIntervalMs} ms) + safety margin (${safetyMarginMs} ms) must be below the ttl (${ttlMs} ms), or the leader's deadline passes before its next renewal`,
      );
    }
    this.name = opts.name ?? SCHEDULER_LEASE;
    this.now = opts.monotonicNow ?? (() => performance.now());
    this.timers = opts.timers ?? REAL_TIMERS;
  }

  /** Starts contending: the first attempt is made at once. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.scheduleAttempt(0);
  }

  fence(): LeaderFence | null {
    const term = this.currentTerm();
    return term === null ? null : { kind: 'lease', name: this.name, epoch: term.epoch };
  }

  onChange(listener: (leading: boolean) => void): void {
    this.listeners.push(listener);
  }

  /**
   * Stops contending and, if leading, gives the lease up: this process stops acting first,
   * then the lease is expired in the database so another replica takes over on its next
   * attempt instead of waiting out the ttl. The database holds a takeover back until this
   * leader's fenced writes in flight have committed (the fence's row lock). An attempt still
   * in flight is not waited for (the database may not answer at all); if it lands, attempt()
   * releases what it got.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.clearTimer('attemptTimer');
    this.clearTimer('deadlineTimer');
    const held = this.term;
    this.term = null;
    this.announce();
    if (held !== null) await this.release(held.epoch);
  }

  private async release(epoch: number): Promise<void> {
    try {
      await this.opts.leases.release(this.name, this.opts.holder, epoch);
      this.opts.logger.info({ epoch }, 'scheduler lease released');
    } catch (err) {
      // It expires by itself within the ttl; a takeover only waits longer.
      this.opts.logger.warn({ err, epoch }, 'could not release the scheduler lease');
    }
  }

  /** The term still within its deadline; a passed deadline ends it here, timer or not. */
  private currentTerm(): Term | null {
    if (this.term !== null && this.now() >= this.term.deadline) {
      this.opts.logger.warn(
        { epoch: this.term.epoch },
        'scheduler lease not renewed before its deadline: no longer scheduling',
      );
      this.term = null;
      this.announce();
    }
    return this.term;
  }

  private scheduleAttempt(ms: number): void {
    this.clearTimer('attemptTimer');
    this.attemptTimer = this.timers.setTimeout(() => {
      this.attemptTimer = null;
      void this.attempt();
    }, ms);
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return;
    const { leases, holder, ttlMs, logger } = this.opts;
    const held = this.currentTerm();
    // Measured before the statement is sent: the database starts the grant's ttl later.
    const sentAt = this.now();
    try {
      const grant =
        held === null
          ? await leases.acquire(this.name, holder, ttlMs)
          : await leases.renew(this.name, holder, held.epoch, ttlMs);
      this.failures = 0;
      if (this.stopped) {
        // Answered after stop(): a grant must not sit unused until its ttl runs out.
        if (grant !== undefined) await this.release(grant.epoch);
        return;
      }
      if (grant === undefined) {
        if (held !== null && this.term === held) {
          logger.warn({ epoch: held.epoch }, 'scheduler lease lost to another holder');
          this.term = null;
        }
      } else {
        const deadline = sentAt + ttlMs - this.opts.safetyMarginMs;
        // An answer that came back after its own deadline grants nothing usable.
        if (deadline > this.now()) {
          if (this.term?.epoch !== grant.epoch) {
            logger.info({ epoch: grant.epoch }, 'scheduler lease acquired: this replica schedules');
          }
          this.term = { epoch: grant.epoch, deadline };
          this.armDeadline(deadline);
        } else if (this.term !== null && this.term.epoch !== grant.epoch) {
          this.term = null;
        }
      }
    } catch (err) {
      // The database is unreachable or refused: keep the term until its deadline (it may be
      // a blip), and keep trying every interval.
      if (this.failures++ === 0) {
        logger.warn({ err, leading: held !== null }, 'scheduler lease: attempt failed; retrying');
      }
    }
    this.announce();
    if (!this.stopped) this.scheduleAttempt(this.opts.renewIntervalMs);
  }

  /** Ends the term at its deadline even when no one asks for the fence then. */
  private armDeadline(deadline: number): void {
    this.clearTimer('deadlineTimer');
    this.deadlineTimer = this.timers.setTimeout(
      () => {
        this.deadlineTimer = null;
        // A timer may fire a little early; the term then still stands, so look again.
        if (this.currentTerm()?.deadline === deadline) this.armDeadline(deadline);
      },
      Math.max(1, deadline - this.now()),
    );
  }

  private announce(): void {
    const leading = this.term !== null;
    if (leading === this.announced) return;
    this.announced = leading;
    for (const l of this.listeners) l(leading);
  }

  private clearTimer(which: 'attemptTimer' | 'deadlineTimer'): void {
    const handle = this[which];
    if (handle !== null) this.timers.clearTimeout(handle);
    this[which] = null;
  }
}
