import type { LeaseHolder } from '../../scheduler/leadership/lease-store.js';

/** One thing /readyz looked at; `gating` ones decide the answer, the others are reported. */
export interface ReadinessCheck {
  name: 'draining' | 'parts' | 'store' | 'schema' | 'leader';
  ok: boolean;
  gating: boolean;
  detail: string;
}

export interface Readiness {
  ready: boolean;
  checks: ReadinessCheck[];
}

export interface ReadinessDeps {
  /**
   * Which migrations this build has that the database has not applied, and which the database
   * has that this build does not know (throws: unreachable).
   */
  migrationStatus(): Promise<{ pending: string[]; unknown?: string[] }>;
  /**
   * The scheduler lease as the database sees it; null for Lite, whose one process is always
   * the scheduler.
   */
  leaseHolder: (() => Promise<LeaseHolder | undefined>) | null;
  /** whether this process holds the lease now */
  leading(): boolean;
  /** whether a missing leader makes this replica unready (not for `api` replicas) */
  leaderGates: boolean;
  /**
   * How long an expired lease still counts as a failover in progress (ttl + renew interval):
   * readiness must not flap on every replica during an ordinary takeover.
   */
  takeoverMs: number;
  draining(): boolean;
  /** the names of the process's parts that stopped running on their own (none: all run) */
  partsNotRunning?(): string[];
  /** each database check gives up after this long: a probe must answer even when the database does not */
  checkTimeoutMs?: number;
}

/**
 * What /readyz answers: not draining, the store reachable, its schema this build's, and a
 * scheduler leader known (for replicas that schedule). An `api` replica stays ready without a
 * leader: taking it out of its Service would stop the API, and the API does not need one.
 */
export async function checkReadiness(d: ReadinessDeps): Promise<Readiness> {
  const timeout = d.checkTimeoutMs ?? 2_000;
  const checks: ReadinessCheck[] = [];
  const draining = d.draining();
  checks.push({
    name: 'draining',
    ok: !draining,
    gating: true,
    detail: draining ? 'stopping (SIGTERM): not taking new work' : 'serving',
  });
  if (d.partsNotRunning) {
    const down = d.partsNotRunning();
    checks.push({
      name: 'parts',
      ok: down.length === 0,
      gating: true,
      detail: down.length === 0 ? 'all running' : `not running: ${down.join(', ')}`,
    });
  }
  let storeOk = false;
  try {
    const { pending, unknown = [] } = await within(d.migrationStatus(), timeout);
    storeOk = true;
    checks.push({ name: 'store', ok: true, gating: true, detail: 'reachable' });
    // A schema newer than this build does not gate: during a rolling upgrade the old replicas
    // keep serving while the first new one has migrated (docs/pro.md, "Migrations").
    checks.push({
      name: 'schema',
      ok: pending.length === 0,
      gating: true,
      detail:
        pending.length > 0
          ? `${pending.length} migration(s) not applied yet (${pending.join(', ')}): a replica of this version migrates at start`
          : unknown.length > 0
            ? `newer than this build (${unknown.join(', ')}): serving during a rolling upgrade; replace this replica`
            : 'current',
    });
  } catch (err) {
    checks.push({
      name: 'store',
      ok: false,
      gating: true,
      detail: `unreachable: ${err instanceof ProbeTimeout ? `no answer within ${timeout} ms` : 'the query failed (see the server log)'}`,
    });
  }
  checks.push(await leaderCheck(d, storeOk, timeout));
  return { ready: checks.every((c) => c.ok || !c.gating), checks };
}

async function leaderCheck(
  d: ReadinessDeps,
  storeOk: boolean,
  timeout: number,
): Promise<ReadinessCheck> {
  const gating = d.leaderGates;
  if (d.leaseHolder === null) return { name: 'leader', ok: true, gating, detail: 'this process' };
  if (d.leading()) return { name: 'leader', ok: true, gating, detail: 'this replica' };
  if (!storeOk) return { name: 'leader', ok: false, gating, detail: 'unknown: store unreachable' };
  try {
    const lease = await within(d.leaseHolder(), timeout);
    if (lease === undefined) {
      return { name: 'leader', ok: false, gating, detail: 'none yet: no replica has scheduled' };
    }
    if (lease.remainingMs > 0) {
      return { name: 'leader', ok: true, gating, detail: `another replica (epoch ${lease.epoch})` };
    }
    const since = -lease.remainingMs;
    return since <= d.takeoverMs
      ? { name: 'leader', ok: true, gating, detail: `takeover in progress (${since} ms)` }
      : {
          name: 'leader',
          ok: false,
          gating,
          detail: `none for ${since} ms: no scheduler replica holds the lease (are any running?)`,
        };
  } catch {
    return { name: 'leader', ok: false, gating, detail: 'unknown: the lease could not be read' };
  }
}

class ProbeTimeout extends Error {}

async function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_r, reject) => {
        timer = setTimeout(() => reject(new ProbeTimeout()), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
