import { isActive } from '@leoflow/core';
import type { Logger } from 'pino';
import type { TenantScope, TenantScopes } from '../tenancy/tenant-scope.js';

/**
 * What the live stream says. Change events carry only identifiers the subscriber may already
 * list (the page refetches what it shows through the REST API, so every byte of data still
 * passes the same authorization); log events carry lines of a try the subscriber may read.
 */
export type UiEvent =
  { type: 'dags' } | { type: 'run'; dag_id: string; run_id: string; state: string };

/** How many of a tenant's newest runs the watcher follows. */
const WATCHED_RUNS = 100;

interface Watcher {
  listeners: Set<(e: UiEvent) => void>;
  dags: string | null;
  runs: Map<string, string>;
  timer: NodeJS.Timeout;
  busy: boolean;
}

/**
 * One watcher per tenant with open streams, whatever their number: each tick costs a DAG list,
 * a run list and the task list of the runs that are active or changed — then fans the
 * differences out to every stream of the tenant. 50 open pages cost what one does.
 */
export class ChangeFeed {
  private readonly watchers = new Map<string, Watcher>();

  constructor(
    private readonly scopes: TenantScopes,
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  subscribe(tenantId: string, listener: (e: UiEvent) => void): () => void {
    let w = this.watchers.get(tenantId);
    if (!w) {
      const created: Watcher = {
        listeners: new Set(),
        dags: null,
        runs: new Map(),
        busy: false,
        timer: setInterval(() => void this.tick(tenantId, created), this.intervalMs),
      };
      created.timer.unref();
      w = created;
      this.watchers.set(tenantId, w);
      void this.tick(tenantId, w);
    }
    w.listeners.add(listener);
    const watcher = w;
    return () => {
      watcher.listeners.delete(listener);
      if (watcher.listeners.size === 0) {
        clearInterval(watcher.timer);
        this.watchers.delete(tenantId);
      }
    };
  }

  close(): void {
    for (const w of this.watchers.values()) clearInterval(w.timer);
    this.watchers.clear();
  }

  /** Open watchers (tests). */
  get size(): number {
    return this.watchers.size;
  }

  private async tick(tenantId: string, w: Watcher): Promise<void> {
    if (w.busy) return;
    w.busy = true;
    try {
      const events = await this.diff(this.scopes.forTenant(tenantId), w);
      for (const e of events) for (const l of w.listeners) l(e);
    } catch (err) {
      this.logger.warn({ err, tenant_id: tenantId }, 'live stream: change check failed');
    } finally {
      w.busy = false;
    }
  }

  private async diff(scope: TenantScope, w: Watcher): Promise<UiEvent[]> {
    const first = w.dags === null;
    const events: UiEvent[] = [];
    const dags = await scope.listDags({ limit: 1000, offset: 0 });
    const dagsPrint = dags
      .map((d) => `${d.dag_id}:${d.current_version}:${d.is_paused ? 1 : 0}`)
      .join(',');
    if (!first && dagsPrint !== w.dags) events.push({ type: 'dags' });
    w.dags = dagsPrint;

    const runs = await scope.listRuns({}, { limit: WATCHED_RUNS, offset: 0 });
    const seen = new Map<string, string>();
    for (const r of runs) {
      const key = `${r.dag_id}\u0000${r.run_id}`;
      const before = w.runs.get(key);
      let print = `${r.state}:${r.ended_at ?? ''}`;
      const active = isActive(r.state);
      if (active || before === undefined || !before.startsWith(`${print}|`)) {
        const { taskInstances } = await scope.listTaskInstances(r.dag_id, r.run_id);
        print += `|${taskInstances.map((t) => `${t.task_id}:${t.state}:${t.try_number}`).join(',')}`;
      } else {
        print = before;
      }
      seen.set(key, print);
      if (!first && print !== before) {
        events.push({ type: 'run', dag_id: r.dag_id, run_id: r.run_id, state: r.state });
      }
    }
    w.runs = seen;
    return events;
  }
}
