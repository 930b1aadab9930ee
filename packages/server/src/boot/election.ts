import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { ServerConfig } from '../config/server-config.js';
import type { ServerRole } from '../config/pro-config.js';
import { NeverLeads, SoleLeadership, type Leadership } from '../scheduler/leadership/leadership.js';
import { LeaseElector } from '../scheduler/leadership/lease-elector.js';
import type { LeaseStore } from '../scheduler/leadership/lease-store.js';
import { openLeaseStore } from '../scheduler/leadership/open-lease-store.js';
import type { Lifecycle } from './lifecycle.js';

export interface Election {
  /** Lite's standalone, or the `leoflow server` role */
  role: ServerRole | 'standalone';
  /** whether this process may schedule (every role but `api`) */
  schedules: boolean;
  /** whether it serves the REST API (every role but `scheduler`) */
  serves: boolean;
  leadership: Leadership;
  /** Pro's contender for the scheduler lease (started last, in the start phase) */
  elector: LeaseElector | null;
  /** the lease as the database has it (readiness reads it); null in Lite */
  leases: LeaseStore | null;
}

/** Phase 3: who schedules — Lite's one process, or the replica that holds Pro's lease. */
export async function openElection(
  cfg: ServerConfig,
  logger: Logger,
  life: Lifecycle,
  /** this process's id as the lease's holder (fresh per process start) */
  instance: string = `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`,
): Promise<Election> {
  const pro = cfg.pro;
  if (!pro) {
    return {
      role: 'standalone',
      schedules: true,
      serves: true,
      leadership: new SoleLeadership(),
      elector: null,
      leases: null,
    };
  }
  const schedules = pro.role !== 'api';
  // Every role reads the lease (readiness); only scheduling roles contend for it.
  const lease = await openLeaseStore(cfg.database, pro.lease.renewIntervalMs);
  life.add({ name: 'lease store', stop: () => lease.close() });
  const elector = schedules
    ? new LeaseElector({
        leases: lease.leases,
        // Fresh per process start: a restarted replica must not renew its predecessor's term.
        holder: instance,
        ttlMs: pro.lease.ttlMs,
        renewIntervalMs: pro.lease.renewIntervalMs,
        safetyMarginMs: pro.lease.safetyMarginMs,
        logger: logger.child({ component: 'leadership' }),
      })
    : null;
  return {
    role: pro.role,
    schedules,
    serves: pro.role !== 'scheduler',
    leadership: elector ?? new NeverLeads(),
    elector,
    leases: lease.leases,
  };
}
