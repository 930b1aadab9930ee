import {
  ACTIVE_STATES,
  dueRuns,
  planRun,
  runOutcome,
  scheduledRunId,
  type Clock,
  type TaskInstanceState,
} from '@leoflow/core';
import type { Logger } from 'pino';
import type { AgentTokenIssuer } from '../auth/agent-token.js';
import type { ClaimProbe } from '../executor/executor.js';
import type { HandOffRegistration } from '../attempts/attempt-launch.js';
import type { Executors } from '../executor/executors.js';
import { SoleLeadership, type Leadership } from './leadership/leadership.js';
import { previousSuccess, taskSpecMessage } from '../attempts/task-spec-message.js';
import type { LeaderFence } from '../store/ports/leader-fence.js';
import type { DagStore } from '../store/ports/dags.js';
import type { RunStore } from '../store/ports/runs.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type { XComStore } from '../store/ports/xcom.js';
import { expandMapped, runView } from './expansion.js';
import type { DagRunRow, TaskInstanceRow } from '../store/types.js';
import { NO_FAULTS, type FaultInjector } from '../util/test-faults.js';
import type { AttemptLifecycle } from '../attempts/attempt-lifecycle.js';
import type { SpecCache } from '../store/spec-cache.js';

export interface SchedulerTimings {
  tickMs: number;
  heartbeatIntervalMs: number;
  agentLostThresholdMs: number;
  dispatchLostThresholdMs: number;
  timeoutGraceMs: number;
  /** after start, reapers wait this long so agents of a crashed predecessor can check back in */
  settlingGraceMs: number;
}

export interface SchedulerDeps {
  store: DagStore & RunStore & TaskInstanceStore & Pick<XComStore, 'getXCom' | 'listMappedXComs'>;
  specs: SpecCache;
  clock: Clock;
  /** dispatch uses the default; a claim's own executor is asked about it */
  executors: Executors;
  tokens: AgentTokenIssuer;
  lifecycle: AttemptLifecycle;
  logger: Logger;
  /** the URL agents dial (the agent port is bound before the plane is assembled) */
  agentUrl: string;
  timings: SchedulerTimings;
  /** test-only crash points (util/test-faults.ts); none in production */
  faults?: FaultInjector;
  /** who may schedule now (Pro: the lease elector); Lite's SoleLeadership when absent */
  leadership?: Leadership;
  /** offered to every executor with each launch (executor.ts, HandOffRegistration) */
  handOff?: HandOffRegistration;
}

const REAP_BATCH = 100;

/**
 * One loop drives everything from the store: cron planning, run promotion, readiness, dispatch,
 * reaping. It keeps no state that a restart would lose; every step is a compare-and-set, so a
 * tick that dies halfway is finished by the next one, in this process or its successor.
 *
 * Only the leader ticks (Pro elects one across replicas; Lite's one process always leads). The
 * writes that create work — a scheduled run, a claim — carry the leader's fence, asked for
 * afresh before each one, so a leader whose deadline passes stops at the next write and the
 * database refuses the write of one that was deposed anyway.
 */
export class Scheduler {
  private readonly constructedAt: number;
  private readonly constructedMono: number;
  private readonly leadership: Leadership;
  /**
   * The leadership term this scheduler last ticked in, and when it began: claims made before
   * that are a predecessor's (see adoptOrphans), and the reapers' settling grace counts from it.
   */
  private term: { epoch: number; startedAt: number; startedMono: number } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  /** a scheduler ticks only between start() and stop(); a poke before start() does nothing */
  private stopped = true;
  /** claims made before this process started may still be waiting for an agent (see adoptOrphans) */
  private orphansPossible = true;

  constructor(private readonly deps: SchedulerDeps) {
    this.constructedAt = deps.clock.now();
    this.constructedMono = deps.clock.monotonicNow ? deps.clock.monotonicNow() : this.constructedAt;
    this.leadership = deps.leadership ?? new SoleLeadership();
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Run a tick soon (something changed); coalesces with a tick in flight. */
  poke(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.loopOnce(), ms);
  }

  private async loopOnce(): Promise<void> {
    this.timer = null;
    if (this.running || this.stopped) return;
    this.again = false;
    this.running = this.tick().catch((err: unknown) => {
      this.deps.logger.error({ err }, 'scheduler tick failed; retrying next tick');
    });
    await this.running;
    this.running = null;
    if (!this.stopped) this.schedule(this.again ? 0 : this.deps.timings.tickMs);
  }

  /** One full pass. Public so tests can drive the scheduler on a manual clock. */
  async tick(): Promise<void> {
    const fence = this.leadership.fence();
    if (fence === null) return;
    this.enterTerm(fence);
    await this.planScheduledRuns();
    if (!this.leading()) return;
    await this.advanceRuns();
    if (!this.leading()) return;
    if (this.orphansPossible) await this.adoptOrphans();
    await this.dispatch();
    if (!this.leading()) return;
    await this.reap();
  }

  private leading(): boolean {
    return this.leadership.fence() !== null;
  }

  /**
   * A new term (Pro: this replica has just become the leader, perhaps long after it started)
   * starts its own settling grace and looks for orphans again: the claims the previous leader
   * made are this leader's to adopt. Lite's one term began with the process.
   */
  private enterTerm(fence: LeaderFence): void {
    if (this.term?.epoch === fence.epoch) return;
    const startedAt = fence.kind === 'sole' ? this.constructedAt : this.deps.clock.now();
    const startedMono =
      fence.kind === 'sole' ? this.constructedMono : this.monoNow(this.deps.clock.now());
    this.term = { epoch: fence.epoch, startedAt, startedMono };
    this.orphansPossible = true;
  }

  /** When the current term began; before the first tick, when this scheduler was built. */
  private get termStartedAt(): number {
    return this.term?.startedAt ?? this.constructedAt;
  }

  /** The same instant on the monotonic clock (the settling grace and the reaper measure on it). */
  private get termStartedMono(): number {
    return this.term?.startedMono ?? this.constructedMono;
  }

  /**
   * Claims a crashed predecessor made (`queued` before this process started) whose agent never
   * registered. A crash must not cost the task a try, so such a claim goes back to `scheduled`
   * with its try unchanged (as Airflow resets orphaned task instances) — at once when no agent
   * can be there (none recorded, or the executor finds it gone), otherwise once the agent has
   * had the dispatch-lost threshold to register. Agents are detached and survive the crash; one
   * that does register in time simply carries on.
   *
   * The fence: the claim's dispatch generation is in its token, and the next claim bumps it. A
   * late agent of the reset claim therefore fails every liveness check (Register, GetTaskSpec,
   * secrets, heartbeat, reports) and never starts its task; two attempts of one try cannot
   * overlap. Runs each tick until no such claim is left; claims made by this process never
   * qualify, so it then stops for good.
   */
  private async adoptOrphans(): Promise<void> {
    const { store, clock, logger, timings } = this.deps;
    const queued = await store.listTaskInstancesInStates(['queued'], 10_000);
    let waiting = false;
    for (const ti of queued) {
      if (!this.inherited(ti)) continue;
      const now = clock.now();
      const probe = await this.probeClaim(ti, now);
      const waited = now - (ti.queued_at ?? now);
      const starting = probe.state === 'starting' && probe.until > now;
      if (probe.state !== 'gone' && (starting || waited <= timings.dispatchLostThresholdMs)) {
        waiting = true;
        continue;
      }
      // Not TASK_INSTANCE_RESET, on purpose: this undoes only the claim (the try is kept, and
      // its start and end times with it), and terminate_requested is left as it is, so a stop
      // asked for since the row was read is not erased.
      const fence = this.leadership.fence();
      if (fence === null) return;
      const reset = await store.updateTaskInstance(
        ti.id,
        {
          states: ['queued'],
          try_number: ti.try_number,
          dispatch_gen: ti.dispatch_gen,
          leader: fence,
        },
        { state: 'scheduled', queued_at: null, hostname: null, pid: null, last_heartbeat_at: null },
        now,
      );
      if (reset) {
        logger.info(
          { dag_id: ti.dag_id, task_id: ti.task_id, try: ti.try_number, agent: probe.state },
          'claimed attempt orphaned by a control-plane restart: back to scheduled, try kept',
        );
      }
    }
    this.orphansPossible = waiting;
  }

  /**
   * What the claim's own executor says of its unregistered agent. An executor that cannot tell
   * leaves it unknown, unless the claim records no placement at all: then no agent was started.
   */
  private async probeClaim(ti: TaskInstanceRow, now: number): Promise<ClaimProbe> {
    const owner = this.deps.executors.owner(ti.executor);
    if (owner?.probeClaim === undefined) {
      return { state: ti.pid === null && ti.hostname === null ? 'gone' : 'unknown' };
    }
    return owner.probeClaim(
      {
        task_instance_id: ti.id,
        try_number: ti.try_number,
        dispatch_gen: ti.dispatch_gen,
        hostname: ti.hostname,
        pid: ti.pid,
        queued_at: ti.queued_at ?? now,
      },
      now,
    );
  }

  /** A claim made before this process started, its agent not registered, nobody asked to stop it. */
  private inherited(ti: TaskInstanceRow): boolean {
    return (
      ti.state === 'queued' &&
      ti.queued_at !== null &&
      ti.queued_at < this.termStartedAt &&
      !ti.terminate_requested
    );
  }

  private async planScheduledRuns(): Promise<void> {
    const { store, specs, clock } = this.deps;
    const now = clock.now();
    for (const dag of await store.listSchedulableDags()) {
      const spec = await specs.get(dag.tenant_id, dag.dag_id, dag.current_version);
      if (spec.schedule === null) continue;
      const due = dueRuns({
        schedule: spec.schedule,
        timezone: spec.schedule_timezone,
        startDate: spec.start_date === null ? null : Date.parse(spec.start_date),
        endDate: spec.end_date === null ? null : Date.parse(spec.end_date),
        catchup: spec.catchup,
        lastLogicalDate: dag.last_scheduled_logical_date,
        now,
        limit: Math.max(1, spec.max_active_runs),
      });
      for (const d of due) {
        const fence = this.leadership.fence();
        if (fence === null) return;
        const created = await store.createRun(
          {
            tenant_id: dag.tenant_id,
            dag_id: dag.dag_id,
            run_id: scheduledRunId(d.logicalDate),
            run_type: 'scheduled',
            dag_version: dag.current_version,
            logical_date: d.logicalDate,
            data_interval_start: d.dataIntervalStart,
            data_interval_end: d.dataIntervalEnd,
            conf: {},
            tasks: spec.tasks.map((t) => ({ task_id: t.task_id, max_tries: t.retries + 1 })),
            now,
          },
          fence,
        );
        if (created) {
          this.deps.logger.info(
            { dag_id: dag.dag_id, run_id: created.run_id },
            'scheduled run created',
          );
        }
      }
    }
  }

  private async advanceRuns(): Promise<void> {
    const { store, specs, clock } = this.deps;
    const runs = await store.listRunsInStates(ACTIVE_STATES);
    const runningPerDag = new Map<string, number>();
    for (const r of runs) {
      if (r.state === 'running') inc(runningPerDag, dagKey(r));
    }
    for (const run of runs) {
      const spec = await specs.get(run.tenant_id, run.dag_id, run.dag_version);
      if (run.state === 'queued') {
        const key = dagKey(run);
        if ((runningPerDag.get(key) ?? 0) >= spec.max_active_runs) continue;
        const now = clock.now();
        const fence = this.leadership.fence();
        if (fence === null) return;
        if (
          await store.setRunState(
            run.id,
            ['queued'],
            'running',
            { started_at: run.started_at ?? now, ended_at: null },
            fence,
          )
        ) {
          inc(runningPerDag, key);
          run.state = 'running';
        } else {
          continue;
        }
      }
      const fence = this.leadership.fence();
      if (fence === null) return;
      await this.advanceRun(run, fence);
    }
  }

  /** Every move is fenced: a leader deposed mid-pass retries, skips and finishes nothing. */
  private async advanceRun(run: DagRunRow, fence: LeaderFence): Promise<void> {
    const { store, specs, clock } = this.deps;
    const spec = await specs.get(run.tenant_id, run.dag_id, run.dag_version);
    const tis = await store.listTaskInstances(run.id);
    const now = clock.now();

    for (const ti of tis) {
      if (ti.state === 'up_for_retry' && ti.retry_at !== null && ti.retry_at <= now) {
        if (
          await store.updateTaskInstance(
            ti.id,
            { states: ['up_for_retry'], try_number: ti.try_number, leader: fence },
            { state: 'scheduled', retry_at: null },
            now,
          )
        ) {
          ti.state = 'scheduled';
        }
      }
    }

    // Each task's state, a mapped task's map indexes' states, and branch decisions (issue 41).
    const view = runView(spec, tis);
    const plan = planRun(spec, view.states, { skippedByDecision: view.skippedByDecision });
    const states = new Map(view.states);
    const moves: [string[], TaskInstanceState][] = [
      [plan.schedule, 'scheduled'],
      [plan.skip, 'skipped'],
      [plan.upstreamFailed, 'upstream_failed'],
    ];
    for (const [ids, to] of moves) {
      for (const id of ids) {
        const ti = view.unexpanded.get(id);
        if (!ti) continue;
        const terminal = to !== 'scheduled';
        if (
          await store.updateTaskInstance(
            ti.id,
            { states: ['none'], try_number: ti.try_number, leader: fence },
            terminal ? { state: to, ended_at: now } : { state: to },
            now,
          )
        ) {
          states.set(id, to);
        }
      }
    }
    for (const id of plan.expand) {
      const ti = view.unexpanded.get(id);
      const task = spec.tasks.find((t) => t.task_id === id);
      if (!ti || !task) continue;
      const out = await expandMapped(store, spec, task, ti, fence, now);
      if (out.kind === 'expanded') {
        states.set(id, new Array<TaskInstanceState>(out.indexes).fill('scheduled'));
        this.deps.logger.info(
          { dag_id: run.dag_id, run_id: run.run_id, task_id: id, map_indexes: out.indexes },
          'mapped task expanded',
        );
      } else if (out.kind === 'skipped') {
        states.set(id, 'skipped');
      } else if (out.kind === 'upstream_failed') {
        if (
          await store.updateTaskInstance(
            ti.id,
            { states: ['none'], try_number: ti.try_number, leader: fence },
            { state: 'upstream_failed', ended_at: now, error_message: out.reason },
            now,
          )
        ) {
          states.set(id, 'upstream_failed');
        }
      }
    }

    const outcome = runOutcome(spec, states);
    if (outcome !== 'running') {
      if (await store.setRunState(run.id, ['running'], outcome, { ended_at: now }, fence)) {
        this.deps.logger.info(
          { dag_id: run.dag_id, run_id: run.run_id, state: outcome },
          'run finished',
        );
      }
    }
  }

  private async dispatch(): Promise<void> {
    const { store, specs, clock, tokens, logger, timings } = this.deps;
    const scheduled = await store.listTaskInstancesInStates(['scheduled'], 500);
    if (scheduled.length === 0) return;
    const activePerDag = new Map<string, number>();
    for (const ti of scheduled) {
      const run = await store.getRunById(ti.dag_run_id);
      if (!run || run.state !== 'running') continue;
      const spec = await specs.get(run.tenant_id, run.dag_id, run.dag_version);
      const key = dagKey(run);
      if (spec.max_active_tasks > 0) {
        if (!activePerDag.has(key)) {
          activePerDag.set(
            key,
            await store.countTaskInstancesInStates(run.tenant_id, run.dag_id, [
              'queued',
              'running',
            ]),
          );
        }
        if ((activePerDag.get(key) ?? 0) >= spec.max_active_tasks) continue;
      }
      // Asked before every claim: a leader past its deadline claims nothing more.
      const fence = this.leadership.fence();
      if (fence === null) return;
      const now = clock.now();
      const taskSpec = spec.tasks.find((t) => t.task_id === ti.task_id);
      const executor = this.deps.executors.forDispatch(taskSpec?.executor);
      if (!executor) {
        await this.failUnroutable(ti, taskSpec?.executor ?? '', fence);
        continue;
      }
      // Every claim is a new dispatch generation; the token carries it (see adoptOrphans).
      const gen = ti.dispatch_gen + 1;
      const claimed = await store.updateTaskInstance(
        ti.id,
        {
          states: ['scheduled'],
          try_number: ti.try_number,
          dispatch_gen: ti.dispatch_gen,
          leader: fence,
        },
        { state: 'queued', queued_at: now, dispatch_gen: gen, executor: executor.name },
        now,
      );
      if (!claimed) continue;
      inc(activePerDag, key);
      const identity = {
        tenant_id: run.tenant_id,
        dag_id: run.dag_id,
        dag_run_id: run.id,
        run_id: run.run_id,
        task_id: ti.task_id,
        map_index: ti.map_index,
        try_number: ti.try_number,
        task_instance_id: ti.id,
        dispatch_gen: gen,
      };
      const faults = this.deps.faults ?? NO_FAULTS;
      try {
        faults.hit('before_spawn');
        const started = await executor.start({
          identity,
          // The executor mints when it hands the credential over; each mint is stamped now.
          credential: { mint: (f) => tokens.mint({ ...identity, ...f }, clock.now()) },
          ...(taskSpec
            ? {
                task: taskSpec,
                agentSpec: taskSpecMessage(
                  run,
                  ti,
                  spec,
                  taskSpec,
                  await previousSuccess(store, run),
                ),
              }
            : {}),
          agentUrl: this.deps.agentUrl,
          heartbeatIntervalMs: timings.heartbeatIntervalMs,
          ...(this.deps.handOff ? { handOff: this.deps.handOff } : {}),
        });
        if (started?.pid !== undefined) {
          // Where the agent runs, so a successor after a crash can tell whether it is still
          // there. A Register that got in first already moved the row on; nothing to do then.
          await store.updateTaskInstance(
            ti.id,
            { states: ['queued'], try_number: ti.try_number, dispatch_gen: gen },
            { pid: started.pid, hostname: started.hostname ?? null },
            clock.now(),
          );
        }
        faults.hit('after_spawn');
      } catch (err) {
        logger.error({ err, dag_id: run.dag_id, task_id: ti.task_id }, 'could not start agent');
        await this.deps.lifecycle.fail(ti.id, ti.try_number, {
          reason: `executor_error: could not start the agent (${(err as Error).message})`,
          dispatchGen: gen,
        });
      }
    }
  }

  /**
   * A task naming an executor this control plane does not run: claimed and failed at once with
   * the fix, rather than left scheduled forever or started somewhere its author did not choose.
   */
  private async failUnroutable(
    ti: TaskInstanceRow,
    name: string,
    fence: LeaderFence,
  ): Promise<void> {
    const { store, clock } = this.deps;
    const now = clock.now();
    const gen = ti.dispatch_gen + 1;
    const claimed = await store.updateTaskInstance(
      ti.id,
      {
        states: ['scheduled'],
        try_number: ti.try_number,
        dispatch_gen: ti.dispatch_gen,
        leader: fence,
      },
      { state: 'queued', queued_at: now, dispatch_gen: gen },
      now,
    );
    if (!claimed) return;
    await this.deps.lifecycle.fail(ti.id, ti.try_number, {
      reason: `LF_EXECUTOR_NOT_CONFIGURED: the task names executor "${name}", which this control plane does not run (configured: ${this.deps.executors.names().join(', ')}); configure it or change the task's executor:`,
      dispatchGen: gen,
    });
  }

  /**
   * Each running attempt's last heartbeat as this replica saw it change, on its monotonic clock:
   * key (id, try) → the row's value, and since when (monotonic) this replica vouches it is that old.
   */
  private readonly heartbeatsSeen = new Map<string, { value: number; since: number }>();
  /** the monotonic time of the previous reap pass (null before this scheduler's first) */
  private lastReapPassMono: number | null = null;

  private monoNow(now: number): number {
    const clock = this.deps.clock;
    return clock.monotonicNow ? clock.monotonicNow() : now;
  }

  /**
   * How long each running attempt has gone without a heartbeat, as this replica can vouch for
   * it. The row's `last_heartbeat_at` was written on whichever replica's wall clock took the
   * heartbeat; comparing it with this replica's wall clock made a clock jump (this one ahead, or
   * the writer behind) look like silence, and live attempts were reaped as lost and started again
   * beside themselves (test/e2e/pro-faults/clock-jump.test.ts). So a value's wall-clock age is
   * believed only up to the monotonic time since the previous pass — a value this pass sees for
   * the first time (new, or changed: the agent heartbeated, wherever) was written since then —
   * and from its sighting on, its age grows on the monotonic clock. The first pass of a term
   * believes the rows' ages; it comes a settling grace after the term began, counted on the
   * monotonic clock, so a leap of the wall clock cannot bring it forward. Without jumps this is
   * each row's age, as before.
   */
  private observeHeartbeats(active: TaskInstanceRow[], now: number, mono: number): void {
    // The first pass of a term believes the rows' ages (a new leader reaps a dead agent's
    // attempt at once); it comes a settling grace after the term began, on the monotonic clock.
    const bound =
      this.lastReapPassMono === null || this.lastReapPassMono < this.termStartedMono
        ? Number.POSITIVE_INFINITY
        : Math.max(0, mono - this.lastReapPassMono);
    const live = new Set<string>();
    for (const ti of active) {
      if (ti.state !== 'running' || ti.last_heartbeat_at === null) continue;
      const key = `${ti.id}\u0000${ti.try_number}`;
      live.add(key);
      const seen = this.heartbeatsSeen.get(key);
      if (seen !== undefined && seen.value === ti.last_heartbeat_at) continue;
      const wallAge = Math.max(0, now - ti.last_heartbeat_at);
      this.heartbeatsSeen.set(key, {
        value: ti.last_heartbeat_at,
        since: mono - Math.min(wallAge, bound),
      });
    }
    for (const key of this.heartbeatsSeen.keys()) {
      if (!live.has(key)) this.heartbeatsSeen.delete(key);
    }
    this.lastReapPassMono = mono;
  }

  private heartbeatAge(ti: TaskInstanceRow, mono: number): number | null {
    const seen = this.heartbeatsSeen.get(`${ti.id}\u0000${ti.try_number}`);
    return seen === undefined ? null : mono - seen.since;
  }

  private async reap(): Promise<void> {
    const { store, clock, timings } = this.deps;
    const now = clock.now();
    const mono = this.monoNow(now);
    // On the monotonic clock: a wall clock leaping forward must not end the grace early.
    if (mono - this.termStartedMono < timings.settlingGraceMs) return;
    const active = await store.listTaskInstancesInStates(ACTIVE_STATES, 10_000);
    this.observeHeartbeats(active, now, mono);
    let reaped = 0;
    for (const ti of active) {
      if (reaped >= REAP_BATCH) break;
      const reason = await this.reapReason(ti, now);
      if (reason === null) continue;
      const fence = this.leadership.fence();
      if (fence === null) return;
      reaped++;
      // Failed first, under the fence: a deposed leader must not stop an agent it cannot fail.
      if (await this.deps.lifecycle.fail(ti.id, ti.try_number, { reason, leader: fence })) {
        await this.deps.executors.owner(ti.executor)?.terminate(ti.id, ti.try_number);
      }
    }
  }

  private async reapReason(ti: TaskInstanceRow, now: number): Promise<string | null> {
    const t = this.deps.timings;
    if (ti.state === 'running') {
      const age = this.heartbeatAge(ti, this.monoNow(now));
      if (age !== null && age > t.agentLostThresholdMs) {
        return `agent_lost: no heartbeat within ${Math.round(t.agentLostThresholdMs / 1000)}s`;
      }
      if (ti.started_at !== null) {
        const run = await this.deps.store.getRunById(ti.dag_run_id);
        if (!run) return null;
        const spec = await this.deps.specs.get(run.tenant_id, run.dag_id, run.dag_version);
        const timeout = spec.tasks.find((x) => x.task_id === ti.task_id)?.execution_timeout_seconds;
        if (timeout != null && now - ti.started_at > timeout * 1000 + t.timeoutGraceMs) {
          return `execution timeout after ${timeout}s (enforced by the control plane)`;
        }
      }
      return null;
    }
    // A predecessor's claim is adoptOrphans' to reset (without a try), not this reaper's to fail.
    if (this.inherited(ti)) return null;
    if (ti.queued_at !== null && now - ti.queued_at > t.dispatchLostThresholdMs) {
      // A claim its executor is still starting (a pod Pending, a runner connecting) is kept up to
      // that executor's own start timeout: failing it now would start a twin beside it.
      const probe = await this.probeClaim(ti, now);
      if (probe.state === 'starting') {
        if (probe.until > now) return null;
        return `dispatch_lost: the ${ti.executor ?? 'default'} executor did not start the agent by its start timeout`;
      }
      return `dispatch_lost: the agent did not start within ${Math.round(t.dispatchLostThresholdMs / 1000)}s`;
    }
    return null;
  }
}

function dagKey(r: { tenant_id: string; dag_id: string }): string {
  return `${r.tenant_id}\u0000${r.dag_id}`;
}

function inc(m: Map<string, number>, k: string): void {
  m.set(k, (m.get(k) ?? 0) + 1);
}
